//! The host with a toy plugin: requests emit an effect that stays pending until its result
//! (naming the effect id) is journaled.

use super::*;
use crate::entry::{AccountId, Currency, Seq, Transfer};
use crate::ledger::LedgerIntent;
use crate::plugin::{Plugin, PluginDecodeError};

/// Applies with a throwaway ledger (the toy moves money only in the intents test).
trait ApplyAlone {
    fn apply1(&mut self, e: &Entry) -> Option<u64>;
}

impl ApplyAlone for PluginHost {
    fn apply1(&mut self, e: &Entry) -> Option<u64> {
        self.apply(e, &mut Ledger::new())
    }
}
use std::collections::BTreeMap;

const REQUEST: u16 = 1;
const RESULT: u16 = 2;
const HOLD: u16 = 3;

#[derive(Default)]
struct Toy {
    seq_applied: Seq,
    ticks: u64,
    pending: BTreeMap<u64, Vec<u8>>,
    done: u64,
    refused: u64,
}

impl Plugin for Toy {
    const KIND: PluginKind = PluginKind::Matching;

    fn apply(&mut self, entry: &Entry, step: &mut Step<'_>) {
        if entry.seq <= self.seq_applied {
            return;
        }
        self.seq_applied = entry.seq;
        match &entry.payload {
            Payload::Tick => self.ticks += 1,
            Payload::Plugin(c) if c.op == REQUEST => {
                let effect_id = Effect::id_for(entry.seq, 0);
                self.pending.insert(effect_id, c.body.clone());
                step.effects().push(Effect { plugin: Self::KIND, effect_id, op: 1, body: c.body.clone() });
            }
            Payload::Plugin(c) if c.op == HOLD => {
                // Holds body[0] minor units of account 1 under hold id = seq; a refusal is
                // counted (plugin state), never a panic.
                let hold = LedgerIntent::Hold {
                    id: entry.seq,
                    account: AccountId(1),
                    amount_minor: u64::from(c.body[0]),
                };
                if step.apply_intents(&[hold]).is_err() {
                    self.refused += 1;
                }
            }
            Payload::Plugin(c) if c.op == RESULT => {
                let id = c.body.get(..8).map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
                if self.pending.remove(&id).is_some() {
                    self.done += 1;
                }
            }
            _ => {}
        }
    }
    fn state_hash(&self) -> u64 {
        let mut out = Vec::new();
        Plugin::encode(self, &mut out);
        bytes64(9, &out)
    }
    fn digest(&self) -> u64 {
        mix64(
            self.seq_applied
                ^ mix64(self.ticks)
                ^ mix64(self.pending.len() as u64 + 77)
                ^ self.done
                ^ self.refused << 32,
        )
    }
    fn pending_effects(&self, out: &mut Vec<Effect>) {
        for (id, body) in &self.pending {
            out.push(Effect { plugin: Self::KIND, effect_id: *id, op: 1, body: body.clone() });
        }
    }
    fn figures(&self, out: &mut Vec<(&'static str, u64)>) {
        out.push(("toy_done", self.done));
    }
    fn encode(&self, out: &mut Vec<u8>) {
        for v in [self.seq_applied, self.ticks, self.done, self.pending.len() as u64] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for (id, body) in &self.pending {
            out.extend_from_slice(&id.to_le_bytes());
            out.push(body.len() as u8);
            out.extend_from_slice(body);
        }
    }
    fn decode(buf: &[u8]) -> Result<Self, PluginDecodeError> {
        let mut r = Reader { buf, at: 0 };
        let mut u = || r.u64().map_err(|_| PluginDecodeError);
        let (seq_applied, ticks, done, n) = (u()?, u()?, u()?, u()?);
        let mut t = Toy { seq_applied, ticks, done, pending: BTreeMap::new(), refused: 0 };
        for _ in 0..n {
            let id = r.u64().map_err(|_| PluginDecodeError)?;
            let len = usize::from(r.take(1).map_err(|_| PluginDecodeError)?[0]);
            t.pending.insert(id, r.take(len).map_err(|_| PluginDecodeError)?.to_vec());
        }
        if r.at != buf.len() {
            return Err(PluginDecodeError);
        }
        Ok(t)
    }
}

fn host(me: u8) -> PluginHost {
    PluginHost::new(CenterId(me), vec![Box::new(Toy::default())]).unwrap_or_else(|e| panic!("{e}"))
}

fn entry(seq: Seq, payload: Payload) -> Entry {
    Entry { seq, epoch: 1, timestamp_us: seq * 10, origin: CenterId(1), bmi: Bmi::NONE, payload }
}

fn request(seq: Seq, tag: u8) -> Entry {
    entry(seq, Payload::Plugin(PluginCommand { plugin: PluginKind::Matching, op: REQUEST, body: vec![tag] }))
}

fn result(seq: Seq, effect_id: u64) -> Entry {
    let body = effect_id.to_le_bytes().to_vec();
    entry(seq, Payload::Plugin(PluginCommand { plugin: PluginKind::Matching, op: RESULT, body }))
}

fn set_owner(seq: Seq, term: u32, owner: u8) -> Entry {
    let c = SetOwner { term, owner: CenterId(owner) }.to_command(PluginKind::Matching);
    entry(seq, Payload::Plugin(c.unwrap_or_else(|e| panic!("{e}"))))
}

fn drain(h: &mut PluginHost) -> Vec<u64> {
    let mut out = Vec::new();
    h.take_effects(&mut out);
    out.iter().map(|e| e.effect_id).collect()
}

#[test]
fn routes_plugin_entries_and_ticks_and_ignores_the_hot_path() {
    let mut h = host(1);
    h.set_live();
    let eur = Currency::new(b"EUR").unwrap_or_else(|e| panic!("{e}"));
    let t = Transfer { debtor: AccountId(1), creditor: AccountId(2), amount_minor: 5, currency: eur };
    assert_eq!(h.apply1(&entry(1, Payload::Transfer(t))), None, "transfers are not the host's");
    assert!(h.apply1(&entry(2, Payload::Tick)).is_some(), "ticks go to every plugin");
    let other = PluginCommand { plugin: PluginKind::Collection, op: REQUEST, body: vec![1] };
    assert_eq!(h.apply1(&entry(3, Payload::Plugin(other))), None, "a plugin that is not enabled");
    assert!(h.apply1(&request(4, 9)).is_some());
    assert_eq!(drain(&mut h), vec![Effect::id_for(4, 0)]);
    assert!(PluginHost::empty(CenterId(1)).apply1(&entry(5, Payload::Tick)).is_none());
    let mut figures = Vec::new();
    h.figures(&mut figures);
    assert!(figures.contains(&("owner_center", 1)) && figures.contains(&("toy_done", 0)));
}

#[test]
fn only_the_live_owner_queues_effects_and_digests_agree() {
    let (mut a, mut b) = (host(1), host(2));
    a.set_live();
    b.set_live();
    for seq in 1..=5 {
        let e = if seq % 2 == 0 { entry(seq, Payload::Tick) } else { request(seq, seq as u8) };
        assert_eq!(a.apply1(&e), b.apply1(&e), "same entry, same step digest, whoever owns");
    }
    assert_eq!(drain(&mut a).len(), 3);
    assert!(drain(&mut b).is_empty(), "DC2 does not own the plugin");
    assert_eq!(a.state_hash(), b.state_hash());
    // A diverged plugin changes the very next digest.
    let mut c = host(3);
    for seq in 1..=4 {
        c.apply1(&if seq % 2 == 0 { entry(seq, Payload::Tick) } else { request(seq, 0) });
    }
    let e = entry(6, Payload::Tick);
    assert_ne!(a.apply1(&e), c.apply1(&e));
}

#[test]
fn a_replaying_owner_queues_nothing_until_live_then_everything_pending() {
    let mut h = host(1);
    h.apply1(&request(1, 1));
    h.apply1(&request(2, 2));
    h.apply1(&result(3, Effect::id_for(1, 0)));
    assert!(!h.has_effects(), "replay never talks to the world");
    h.set_live();
    assert_eq!(drain(&mut h), vec![Effect::id_for(2, 0)], "only the unanswered effect is redone");
}

/// DC1 owns, executes one effect and dies before its result is journaled; DC2 takes over at the
/// next term and executes it again; a stale or malformed takeover changes nothing.
#[test]
fn failover_moves_pending_effects_to_the_new_owner() {
    let mut hosts: Vec<PluginHost> = (1..=3).map(host).collect();
    for h in &mut hosts {
        h.set_live();
    }
    let mut seq = 0;
    let mut apply_all = |hosts: &mut Vec<PluginHost>, make: &dyn Fn(Seq) -> Entry| {
        seq += 1;
        let e = make(seq);
        let digests: Vec<_> = hosts.iter_mut().map(|h| h.apply1(&e)).collect();
        assert!(digests.windows(2).all(|w| w[0] == w[1]), "all centers agree at seq {seq}");
        seq
    };
    apply_all(&mut hosts, &|s| request(s, 7));
    apply_all(&mut hosts, &|s| request(s, 8));
    assert_eq!(drain(&mut hosts[0]).len(), 2, "DC1 executes both");
    apply_all(&mut hosts, &|s| result(s, Effect::id_for(1, 0)));
    // DC1 is gone; DC2 proposes term 1, DC3 a stale term 0 and a malformed one.
    apply_all(&mut hosts, &|s| set_owner(s, 1, 2));
    apply_all(&mut hosts, &|s| set_owner(s, 1, 3));
    apply_all(&mut hosts, &|s| {
        entry(
            s,
            Payload::Plugin(PluginCommand {
                plugin: PluginKind::Matching,
                op: HOST_OP_SET_OWNER,
                body: vec![1],
            }),
        )
    });
    assert_eq!(hosts[2].owner(PluginKind::Matching), Some((CenterId(2), 1)));
    assert_eq!(drain(&mut hosts[1]), vec![Effect::id_for(2, 0)], "the pending effect, not the answered one");
    assert!(drain(&mut hosts[2]).is_empty());
    let s = apply_all(&mut hosts, &|s| request(s, 9));
    assert_eq!(drain(&mut hosts[1]), vec![Effect::id_for(s, 0)], "new effects go to the new owner");
    assert!(drain(&mut hosts[0]).is_empty(), "the old owner, if still running, no longer executes");
    // Results from both owners: the second is ignored by the plugin, state stays identical.
    apply_all(&mut hosts, &|s| result(s, Effect::id_for(2, 0)));
    apply_all(&mut hosts, &|s| result(s, Effect::id_for(2, 0)));
    let mut figures = Vec::new();
    hosts[1].figures(&mut figures);
    assert!(figures.contains(&("toy_done", 2)), "{figures:?}");
    assert!(hosts.windows(2).all(|w| w[0].state_hash() == w[1].state_hash()));
}

#[test]
fn checkpoint_round_trips_and_is_checked() {
    let mut h = host(2);
    h.apply1(&request(1, 1));
    h.apply1(&set_owner(2, 1, 2));
    let mut buf = Vec::new();
    h.encode(&mut buf);
    assert_eq!(PluginHost::kinds_in(&buf), Some(vec![PluginKind::Matching]));
    assert_eq!(PluginHost::kinds_in(&buf[..buf.len() - 1]), None);
    let mut back = host(2);
    assert_eq!(back.restore(&buf), Ok(buf.len()));
    assert_eq!(back.state_hash(), h.state_hash());
    assert_eq!(back.owner(PluginKind::Matching), Some((CenterId(2), 1)));
    back.set_live();
    assert_eq!(drain(&mut back), vec![Effect::id_for(1, 0)], "a restarted owner redoes what is pending");
    for n in 0..buf.len() {
        assert!(host(2).restore(&buf[..n]).is_err(), "truncated at {n}");
    }
    let mut bad = buf.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    assert!(host(2).restore(&bad).is_err(), "a flipped state byte fails the hash check");
    assert!(PluginHost::empty(CenterId(1)).restore(&buf).is_err(), "another plugin set");
    let two: Vec<Box<dyn HostedPlugin>> = vec![Box::new(Toy::default()), Box::new(Toy::default())];
    assert_eq!(PluginHost::new(CenterId(1), two).err(), Some(DuplicatePlugin(PluginKind::Matching)));
}

/// A plugin moves money only through its step's intents: they apply to the ledger in the
/// entry's seq, a refusal is the plugin's to handle, and the digest covers both.
#[test]
fn intents_reach_the_ledger_and_the_digest() {
    let eur = Currency::new(b"EUR").unwrap_or_else(|e| panic!("{e}"));
    let mut ledger = Ledger::new();
    ledger.apply(&entry(1, Payload::AccountOpen { account: AccountId(1), currency: eur }));
    ledger.apply(&entry(2, Payload::AccountFund { account: AccountId(1), amount_minor: 10 }));
    let hold = |seq, amount| {
        entry(
            seq,
            Payload::Plugin(PluginCommand { plugin: PluginKind::Matching, op: HOLD, body: vec![amount] }),
        )
    };
    let (mut a, mut b) = (host(1), host(1));
    let mut other = ledger.clone();
    ledger.apply(&hold(3, 6));
    let da = a.apply(&hold(3, 6), &mut ledger);
    assert_eq!(ledger.account(AccountId(1)).map(|x| (x.balance_minor, x.held_minor)), Some((4, 6)));
    let intent = LedgerIntent::Hold { id: 3, account: AccountId(1), amount_minor: 6 };
    let record = crate::plugin::IntentRecord { intent, hold: None, applied: true };
    assert_eq!(a.intents_applied(), &[(PluginKind::Matching, record)]);
    // The same plugin state, but the hold is refused (AM04) on a poorer ledger: another digest.
    other
        .apply_intents(
            PluginKind::Collection,
            &[LedgerIntent::Hold { id: 1, account: AccountId(1), amount_minor: 5 }],
        )
        .unwrap_or_else(|e| panic!("{e}"));
    other.apply(&hold(3, 6));
    let db = b.apply(&hold(3, 6), &mut other);
    assert!(b.intents_applied().is_empty());
    assert_ne!(da, db);
    assert!(ledger.check_conservation().is_ok() && other.check_conservation().is_ok());
}
