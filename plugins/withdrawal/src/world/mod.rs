//! The outside world of the withdrawal plugin, behind the adapter traits a real integration
//! implements, and its simulators.
//!
//! * [`Screener`] — the AML screener (Chainalysis / Elliptic): accept, alert, reject, freeze,
//!   or no answer.
//! * [`PolicyEngine`] — the custody's transaction policy: a rule blocks (BLOCKED) or lets the
//!   request on to the approvers.
//! * [`Custody`] — the custody signer (Fireblocks): approvals, signatures (also sign-only: the
//!   signed payload goes back to the customer), raw signing, and no answer at all.
//! * [`ChainClient`] — a chain's node (broadcast, lookups) and monitor (webhooks: in a block,
//!   at the threshold depth, reorged away).
//!
//! Each is sans-IO like the plugin: a real client does its I/O between the calls; the
//! simulators answer from their own model, on their own clock. [`World`] drives them as the
//! node's `EffectAdapter`: it routes each effect to the service it names, turns what they
//! answer into journal commands with `bmi`s derived from what they answer, and plays the
//! people around them — a customer who broadcasts a sign-only payload (or never does), and
//! operators who answer alerts (boost or drop a STALE withdrawal, bypass or rescreen an AML
//! alert, retry a failure), and participants who cancel.
//!
//! **Idempotency keys.** An answer to an effect is `WR<effect id>`; a webhook is `WW<hash of
//! its content>` (the same report twice is one journal entry: the sequencer dedupes it; a
//! duplicate that gets through anyway is recognised by the plugin); an operator's action is
//! `WOP<n>`. An effect executed twice (an old and a new owner) gets the same key.
//!
//! **Time.** The world runs on its own clock: `world_us = start + (now_us - first now_us) ×
//! time_scale`, so a demo sees blocks in milliseconds; the plugin's own timers follow the
//! journal. A signature's validity (journal time in the raw transaction) is mapped to the
//! world's clock the same way before a chain judges it.
//!
//! Simulators: [`services`] (screener, policy engine, custody), [`evm`] (the shared EVM chain of
//! `rtgs-chain-sim`), [`seq`] (a UTXO chain with RBF and an unconfirmed-chain limit, a
//! Solana-like chain with blockhash expiry, and the validity-window chains), [`workload`]
//! (chains, vaults, accounts and requests for demos and the simulator).

pub mod evm;
pub mod seq;
pub mod services;
pub mod workload;

use std::collections::{BTreeMap, BTreeSet};

use rtgs_chain_sim::answer::{BroadcastOutcome, ReceiptStatus};
use rtgs_core::entry::{Bmi, PluginCommand};
use rtgs_core::plugin::{Effect, EffectAdapter, PluginAlert};
use rtgs_core::prng::Prng;

use crate::alert::{parse_subject, AlertKind};
use crate::command::*;
use crate::effect::*;
use crate::operation::{Actor, ActorKind, OpParams, OperationKind};
use crate::records::Purpose;
use crate::types::*;
use crate::wire::from_slice;

/// The AML screener.
pub trait Screener: Send {
    /// Screens a withdrawal; the verdict comes out of `poll` later (or never: a timeout).
    fn screen(&mut self, effect_id: u64, req: &Screen, now_us: u64);
    fn poll(&mut self, now_us: u64, out: &mut Vec<WithdrawalCommand>);
}

/// The custody's policy engine: `Some(rule)` blocks the request.
pub trait PolicyEngine: Send {
    fn evaluate(&mut self, req: &Authorize) -> Option<u32>;
}

/// The custody signer.
pub trait Custody: Send {
    /// Asks the approvers; the decision comes out of `poll` (or never).
    fn approve(&mut self, effect_id: u64, req: &Authorize, now_us: u64);
    /// Signs a raw transaction. The same raw transaction always gives the same signed payload.
    fn sign(&mut self, effect_id: u64, req: &Sign, now_us: u64);
    fn sign_raw(&mut self, effect_id: u64, req: &SignRaw, now_us: u64);
    fn poll(&mut self, now_us: u64, out: &mut Vec<WithdrawalCommand>);
}

/// A signed transaction as a node receives it.
#[derive(Clone, Debug)]
pub struct SignedTx {
    pub raw: RawTx,
    pub hash: TxHash,
    /// The raw transaction's validity, on the world's clock.
    pub valid_until_us: Option<u64>,
}

/// What a receipt lookup finds (read at one block).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LookupAnswer {
    pub tip_height: u64,
    /// Ordered slots only: how many of the sender's slots the chain has used.
    pub slots_used: Option<u64>,
    pub receipts: Vec<(TxHash, ReceiptStatus)>,
}

/// A chain's node and monitor.
pub trait ChainClient: Send {
    /// Sends a signed transaction; the node's answer. `request_id` names the request (the same
    /// request refused for certain is refused again, whatever the chain is like now).
    fn broadcast(&mut self, request_id: u64, tx: &SignedTx, now_us: u64) -> BroadcastOutcome;
    fn lookup(&mut self, hashes: &[TxHash], sender: u64, now_us: u64) -> LookupAnswer;
    /// Moves the chain to `now_us`; appends the monitor's webhooks with when they are due.
    fn advance(&mut self, now_us: u64, out: &mut Vec<(u64, ChainEvent)>);
    /// Every transaction the chain saw, with whether it is mined now (the end checks: no
    /// withdrawal paid twice, nothing sent that the plugin did not record).
    fn seen(&self) -> Vec<(TxHash, Option<RawTx>, bool)>;
    fn figures(&self, out: &mut Vec<(&'static str, u64)>);
    /// The simulator behind it (tests force faults on it).
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any;
}

/// Splits a signed payload into its raw transaction (the simulators' format: the raw
/// transaction's bytes, then a 32-byte signature).
pub fn open_payload(payload: &Blob) -> Option<RawTx> {
    let body = payload.0.get(..payload.0.len().checked_sub(32)?)?;
    from_slice(body).ok()
}

/// An address for a destination's text (the simulators' address space is integers).
pub fn address_of(destination: &Text) -> u64 {
    rtgs_core::hash::bytes64(0xADD2, destination.as_str().as_bytes()) | (1 << 63)
}

/// What the people around the plugin do, and the world's own faults, per mille.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct People {
    /// A customer never broadcasts a sign-only payload.
    pub customer_never: u32,
    /// Delay before a customer broadcasts (world µs, up to).
    pub customer_delay_us: u64,
    /// Participants cancel a withdrawal they were asked to authorize (some too late: refused).
    pub participant_cancel: u32,
    /// Operators answer an alert after this (world µs).
    pub operator_delay_us: u64,
    /// Operators retry a failure they were alerted to.
    pub operator_retry: u32,
    /// Webhooks delivered twice.
    pub webhook_duplicate: u32,
    /// Latency of RPC answers and of the policy engine (world µs).
    pub rpc_latency_us: u64,
}

impl People {
    pub const CALM: People = People {
        customer_never: 0,
        customer_delay_us: 5_000_000,
        participant_cancel: 0,
        operator_delay_us: 60_000_000,
        operator_retry: 0,
        webhook_duplicate: 0,
        rpc_latency_us: 200_000,
    };

    pub fn with_faults() -> People {
        People {
            customer_never: 100,
            participant_cancel: 20,
            operator_retry: 500,
            webhook_duplicate: 50,
            ..People::CALM
        }
    }
}

/// Counts for reports and tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorldStats {
    pub effects_executed: u64,
    pub effects_undecodable: u64,
    pub results: u64,
    pub results_unencodable: u64,
    pub chain_broadcasts: u64,
    pub customer_broadcasts: u64,
    pub operator_actions: u64,
    pub participant_cancels: u64,
    pub webhooks_duplicated: u64,
    /// Distinct alerts (by id) the operators saw open in the plugin's state.
    pub alerts: u64,
    /// Effects for a chain the world does not know (a wiring bug).
    pub unknown_chain: u64,
}

/// The whole outside world as the node's `EffectAdapter` (see the module docs).
pub struct World {
    pub screener: Box<dyn Screener>,
    pub policy: Box<dyn PolicyEngine>,
    pub custody: Box<dyn Custody>,
    pub chains: BTreeMap<ChainId, Box<dyn ChainClient>>,
    pub people: People,
    pub stats: WorldStats,
    pub time_scale: u64,
    start_us: u64,
    origin_us: Option<u64>,
    prng: Prng,
    outbox: BTreeMap<(u64, u64), (Bmi, WithdrawalCommand)>,
    outbox_seq: u64,
    customer_sends: BTreeMap<(u64, u64), SignedTx>,
    sign_only: BTreeSet<u64>,
    /// The fee each withdrawal's last signed transaction asked for (operators boost from it).
    fees: BTreeMap<WithdrawalId, u64>,
    boosts: BTreeMap<WithdrawalId, u32>,
    operator_seq: u64,
    alerts: Vec<(u64, SeenAlert)>,
    /// Open alerts the operators answered, by id: when (world µs).
    answered: BTreeMap<u64, u64>,
    scratch: Vec<WithdrawalCommand>,
    events: Vec<(u64, ChainEvent)>,
}

/// The services a world is made of.
pub struct Services {
    pub screener: Box<dyn Screener>,
    pub policy: Box<dyn PolicyEngine>,
    pub custody: Box<dyn Custody>,
    pub chains: BTreeMap<ChainId, Box<dyn ChainClient>>,
}

impl World {
    pub fn new(services: Services, people: People, seed: u64, start_us: u64, time_scale: u64) -> World {
        let Services { screener, policy, custody, chains } = services;
        World {
            screener,
            policy,
            custody,
            chains,
            people,
            stats: WorldStats::default(),
            time_scale: time_scale.max(1),
            start_us,
            origin_us: None,
            prng: Prng::new(seed ^ 0x0EE0_1DEA),
            outbox: BTreeMap::new(),
            outbox_seq: 0,
            customer_sends: BTreeMap::new(),
            sign_only: BTreeSet::new(),
            fees: BTreeMap::new(),
            boosts: BTreeMap::new(),
            operator_seq: 0,
            alerts: Vec::new(),
            answered: BTreeMap::new(),
            scratch: Vec::new(),
            events: Vec::new(),
        }
    }

    /// The world's clock at journal time `now_us` (the first call fixes the origin).
    pub fn world_us(&mut self, now_us: u64) -> u64 {
        let origin = *self.origin_us.get_or_insert(now_us);
        self.start_us.saturating_add(now_us.saturating_sub(origin).saturating_mul(self.time_scale))
    }

    /// An instant of journal time on the world's clock (before the origin: the start).
    fn world_at(&self, journal_us: u64) -> u64 {
        let origin = self.origin_us.unwrap_or(journal_us);
        self.start_us.saturating_add(journal_us.saturating_sub(origin).saturating_mul(self.time_scale))
    }

    /// Every alert the operators saw open, when they first saw it (world µs).
    pub fn alerts(&self) -> &[(u64, SeenAlert)] {
        &self.alerts
    }

    /// Forgets the answers to effects not handed out yet (tests: the owner that executed them
    /// crashed, and they were lost with it; webhooks and the people's actions stay).
    pub fn lose_answers(&mut self) -> usize {
        let before = self.outbox.len();
        self.outbox.retain(|_, (_, cmd)| cmd.effect_id().is_none());
        before - self.outbox.len()
    }

    fn roll(&mut self, permille: u32) -> bool {
        permille > 0 && self.prng.chance(u64::from(permille), 1000)
    }

    fn send(&mut self, due_us: u64, bmi: Option<Bmi>, cmd: WithdrawalCommand) {
        let bmi = match bmi.or_else(|| result_bmi(&cmd).ok()) {
            Some(b) => b,
            None => {
                self.stats.results_unencodable += 1;
                return;
            }
        };
        self.outbox_seq += 1;
        self.outbox.insert((due_us, self.outbox_seq), (bmi, cmd));
    }

    fn run(&mut self, effect_id: u64, e: WithdrawalEffect, t: u64) {
        match e {
            WithdrawalEffect::Screen(s) => self.screener.screen(effect_id, &s, t),
            WithdrawalEffect::Authorize(a) => self.authorize(effect_id, &a, t),
            WithdrawalEffect::Sign(s) => {
                self.fees.insert(s.raw.withdrawal, s.raw.fee);
                if s.sign_only {
                    self.sign_only.insert(effect_id);
                }
                self.custody.sign(effect_id, &s, t);
            }
            WithdrawalEffect::SignRaw(s) => self.custody.sign_raw(effect_id, &s, t),
            WithdrawalEffect::Broadcast(b) => self.broadcast(effect_id, &b, t),
            WithdrawalEffect::Lookup(l) => self.lookup(effect_id, &l, t),
        }
    }

    fn authorize(&mut self, effect_id: u64, a: &Authorize, t: u64) {
        if self.roll(self.people.participant_cancel) {
            self.stats.participant_cancels += 1;
            let actor = Actor { kind: ActorKind::Participant, id: ActorId(a.account.0) };
            self.operate(
                t + self.people.rpc_latency_us,
                a.withdrawal,
                OperationKind::Cancel,
                actor,
                OpParams::default(),
            );
        }
        match self.policy.evaluate(a) {
            Some(rule) => {
                let d = Decided { effect_id, withdrawal: a.withdrawal, blocked_by_rule: Some(rule) };
                self.send(t + self.people.rpc_latency_us, None, WithdrawalCommand::Decided(d));
            }
            None => self.custody.approve(effect_id, a, t),
        }
    }

    fn broadcast(&mut self, effect_id: u64, b: &Broadcast, t: u64) {
        let Some(raw) = open_payload(&b.signed_payload) else {
            self.stats.effects_undecodable += 1;
            return;
        };
        let tx =
            SignedTx { valid_until_us: raw.valid_until_us.map(|v| self.world_at(v)), raw, hash: b.tx_hash };
        let Some(chain) = self.chains.get_mut(&b.chain) else {
            self.stats.unknown_chain += 1;
            return;
        };
        self.stats.chain_broadcasts += 1;
        let outcome = chain.broadcast(effect_id, &tx, t);
        let r = BroadcastResult { effect_id, withdrawal: b.withdrawal, tx_hash: b.tx_hash, outcome };
        self.send(t + self.people.rpc_latency_us, None, WithdrawalCommand::BroadcastResult(r));
    }

    fn lookup(&mut self, effect_id: u64, l: &Lookup, t: u64) {
        let Some(chain) = self.chains.get_mut(&l.chain) else {
            self.stats.unknown_chain += 1;
            return;
        };
        let a = chain.lookup(&l.hashes, l.vault_address, t);
        let r = ReceiptsLooked {
            effect_id,
            withdrawal: l.withdrawal,
            tip_height: a.tip_height,
            slots_used: a.slots_used,
            receipts: a.receipts,
        };
        self.send(t + self.people.rpc_latency_us, None, WithdrawalCommand::ReceiptsLooked(r));
    }

    /// Operators read the open alerts: each one answered when first seen, and again while it
    /// stays open every `OPERATOR_LOOK_AGAIN` answer delays (an answer refused then — a boost
    /// while a lookup is out — is tried again). Alerts no longer open are forgotten.
    fn read_alerts(&mut self, open: &[PluginAlert], t: u64) {
        self.answered.retain(|id, _| open.iter().any(|a| a.id == *id));
        for a in open {
            if a.plugin != rtgs_core::entry::PluginKind::Withdrawal {
                continue;
            }
            let (Some(kind), Some(withdrawal)) = (AlertKind::from_name(a.kind), parse_subject(&a.subject))
            else {
                continue;
            };
            let again = t.saturating_sub(self.people.operator_delay_us.saturating_mul(OPERATOR_LOOK_AGAIN));
            match self.answered.get(&a.id) {
                Some(&at) if at > again => continue,
                Some(_) => {}
                None => {
                    self.stats.alerts += 1;
                    self.alerts.push((t, SeenAlert { id: a.id, kind, withdrawal }));
                }
            }
            self.answered.insert(a.id, t);
            self.on_alert(SeenAlert { id: a.id, kind, withdrawal }, t);
        }
    }

    /// Operators answer an alert (see the module docs).
    fn on_alert(&mut self, a: SeenAlert, t: u64) {
        let due = t + self.people.operator_delay_us;
        let op = Actor { kind: ActorKind::Operator, id: ActorId(1) };
        match a.kind {
            AlertKind::Stale => {
                let boosts = self.boosts.entry(a.withdrawal).or_default();
                *boosts += 1;
                let (kind, params) = if *boosts <= 2 {
                    let fee = self.fees.get(&a.withdrawal).copied().unwrap_or(1).saturating_mul(2);
                    (OperationKind::Boost, OpParams { fee: Some(fee), ..OpParams::default() })
                } else {
                    (OperationKind::Drop, OpParams::default())
                };
                self.operate(due, a.withdrawal, kind, op, params);
            }
            AlertKind::AmlAlert | AlertKind::AmlNoAnswer => {
                let (kind, params) = if self.prng.chance(1, 2) {
                    (
                        OperationKind::BypassAml,
                        OpParams { reason: Text::new("reviewed", 64).ok(), ..OpParams::default() },
                    )
                } else {
                    (OperationKind::RescreenAml, OpParams::default())
                };
                self.operate(due, a.withdrawal, kind, op, params);
            }
            AlertKind::BroadcastRejected
            | AlertKind::ValidityPassed
            | AlertKind::SignatureExpired
            | AlertKind::SlotUsedElsewhere
            | AlertKind::Reverted
            | AlertKind::ReorgedAway => {
                if self.roll(self.people.operator_retry) {
                    self.operate(due, a.withdrawal, OperationKind::Retry, op, OpParams::default());
                }
            }
            AlertKind::MissedWebhook | AlertKind::LedgerRefused | AlertKind::AmlFrozen => {}
        }
    }

    fn operate(
        &mut self,
        due: u64,
        withdrawal: WithdrawalId,
        operation: OperationKind,
        actor: Actor,
        params: OpParams,
    ) {
        self.operator_seq += 1;
        if actor.kind == ActorKind::Operator {
            self.stats.operator_actions += 1;
        }
        let Ok(bmi) = Bmi::numbered("WOP", self.operator_seq) else { return };
        self.send(
            due,
            Some(bmi),
            WithdrawalCommand::Operate(Operate { withdrawal, operation, actor, params }),
        );
    }

    /// Signed sign-only payloads go back to their customer, who broadcasts later — or never.
    fn customers(&mut self, answers: &[WithdrawalCommand], t: u64) {
        for cmd in answers {
            let WithdrawalCommand::SignatureResult(r) = cmd else { continue };
            let SignOutcome::Signed { signed_payload, tx_hash } = &r.outcome else { continue };
            if !self.sign_only.remove(&r.effect_id) {
                continue;
            }
            let Some(raw) = open_payload(signed_payload) else { continue };
            if raw.purpose != Purpose::Payment || self.roll(self.people.customer_never) {
                continue;
            }
            let delay = self.prng.range(0, self.people.customer_delay_us.max(1));
            let tx = SignedTx {
                valid_until_us: raw.valid_until_us.map(|v| self.world_at(v)),
                raw,
                hash: *tx_hash,
            };
            self.outbox_seq += 1;
            self.customer_sends.insert((t + delay, self.outbox_seq), tx);
        }
    }

    fn poll_world(&mut self, t: u64) {
        let mut answers = std::mem::take(&mut self.scratch);
        answers.clear();
        self.screener.poll(t, &mut answers);
        self.custody.poll(t, &mut answers);
        self.customers(&answers, t);
        for cmd in answers.drain(..) {
            self.send(t, None, cmd);
        }
        self.scratch = answers;
        while let Some(e) = self.customer_sends.first_entry() {
            if e.key().0 > t {
                break;
            }
            let tx = e.remove();
            if let Some(chain) = self.chains.get_mut(&tx.raw.chain) {
                self.stats.customer_broadcasts += 1;
                chain.broadcast(u64::MAX - self.outbox_seq, &tx, t);
            }
        }
        let mut events = std::mem::take(&mut self.events);
        events.clear();
        for chain in self.chains.values_mut() {
            chain.advance(t, &mut events);
        }
        for (due, e) in events.drain(..) {
            let cmd = WithdrawalCommand::ChainEvent(e);
            if self.roll(self.people.webhook_duplicate) {
                self.stats.webhooks_duplicated += 1;
                self.send(due + self.people.rpc_latency_us, None, cmd.clone());
            }
            self.send(due, None, cmd);
        }
        self.events = events;
    }
}

/// The end checks a world can make against a plugin's state (the simulator's, the tests'):
/// nothing on any chain that the plugin did not sign and record for a withdrawal it knows (the
/// same signed payload sent again is the same hash); no withdrawal paid twice; a COMPLETED one
/// (not raw signing) paid exactly once and its money settled; any other final one not paid and
/// its money back. The ledger's side (the settlement accounts) is the caller's.
pub fn check_paid_once(world: &World, p: &crate::WithdrawalPlugin) -> Result<(), String> {
    use crate::state::Money;
    use crate::status::Status;
    let mut paid: BTreeMap<WithdrawalId, u32> = BTreeMap::new();
    for chain in world.chains.values() {
        for (hash, raw, mined) in chain.seen() {
            let Some(raw) = raw else { continue };
            let w = p.withdrawal(raw.withdrawal).ok_or(format!("{hash:?} sent for no withdrawal"))?;
            if !w.attempts.iter().any(|a| *a.tx_hash() == hash) {
                return Err(format!("{hash:?} on chain but never recorded by {:?}", w.id));
            }
            if mined && raw.purpose != Purpose::Drop {
                *paid.entry(raw.withdrawal).or_default() += 1;
            }
        }
    }
    for w in p.withdrawals() {
        let n = paid.get(&w.id).copied().unwrap_or(0);
        let raw = matches!(w.kind, RequestKind::Raw(_));
        if n > 1 {
            return Err(format!("{:?} paid {n} times", w.id));
        }
        if w.status == Status::Completed && !raw && (n, w.money) != (1, Money::Settled) {
            return Err(format!("{:?} COMPLETED, paid {n} times, money {:?}", w.id, w.money));
        }
        if w.status.is_final() && w.status != Status::Completed {
            let returned =
                matches!(w.money, Money::Released | Money::Reversed) || (raw && w.money == Money::None);
            if n != 0 || !returned {
                return Err(format!("{:?} ended {:?}, paid {n} times, money {:?}", w.id, w.status, w.money));
            }
        }
    }
    Ok(())
}

/// The `bmi` of a result (see the module docs).
pub fn result_bmi(cmd: &WithdrawalCommand) -> Result<Bmi, rtgs_core::entry::InputError> {
    if let Some(id) = cmd.effect_id() {
        return Bmi::numbered("WR", id);
    }
    let (op, body) = cmd.encode();
    Bmi::numbered("WW", rtgs_core::hash::bytes64(u64::from(op), &body) >> 1)
}

/// An alert as the operators saw it (from a node's status: kind, subject, id).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SeenAlert {
    pub id: u64,
    pub kind: AlertKind,
    pub withdrawal: WithdrawalId,
}

/// Operators look at an alert still open again after this many answer delays.
pub const OPERATOR_LOOK_AGAIN: u64 = 5;

impl EffectAdapter for World {
    fn alerts_seen(&mut self, alerts: &[PluginAlert], now_us: u64) {
        let t = self.world_us(now_us);
        self.read_alerts(alerts, t);
    }

    fn execute(&mut self, effect: &Effect, now_us: u64) {
        let t = self.world_us(now_us);
        // The world moves on before it answers: the effect sees it as of now.
        self.poll_world(t);
        match WithdrawalEffect::from_effect(effect) {
            Ok(e) => {
                self.stats.effects_executed += 1;
                self.run(effect.effect_id, e, t);
            }
            // Not ours (another plugin's effect reached this adapter): a wiring bug, counted.
            Err(_) => self.stats.effects_undecodable += 1,
        }
    }

    fn poll(&mut self, now_us: u64, out: &mut Vec<(Bmi, PluginCommand)>) {
        let t = self.world_us(now_us);
        self.poll_world(t);
        while let Some(entry) = self.outbox.first_entry() {
            if entry.key().0 > t {
                break;
            }
            let (bmi, cmd) = entry.remove();
            match cmd.to_plugin_command() {
                Ok(pc) => {
                    self.stats.results += 1;
                    out.push((bmi, pc));
                }
                // Results are built from bounded effects; one over the limits is a bug, counted.
                Err(_) => self.stats.results_unencodable += 1,
            }
        }
    }

    fn figures(&self, out: &mut Vec<(&'static str, u64)>) {
        let s = &self.stats;
        // Every chain reports the same names: summed over the chains.
        let mut chains: BTreeMap<&'static str, u64> = BTreeMap::new();
        let mut one = Vec::new();
        for c in self.chains.values() {
            one.clear();
            c.figures(&mut one);
            for (name, v) in &one {
                *chains.entry(*name).or_default() += v;
            }
        }
        out.extend([
            ("adapter_effects_executed", s.effects_executed),
            ("adapter_results_polled", s.results),
            ("adapter_effects_undecodable", s.effects_undecodable),
            ("withdrawal_chain_broadcasts", s.chain_broadcasts),
            ("withdrawal_customer_broadcasts", s.customer_broadcasts),
            ("withdrawal_operator_actions", s.operator_actions),
            ("withdrawal_participant_cancels", s.participant_cancels),
        ]);
        out.extend(chains);
    }
}
