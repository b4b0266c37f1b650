//! The center's rules, each on a small cluster driven by hand: a journal, one ack stream that
//! every center reads at its own position, commits answered at once (unless a test holds them).

use super::*;
use crate::entry::{AccountId, Currency, Payload, PluginCommand, PluginKind, Transfer};
use crate::plugin::{Plugin, PluginDecodeError, Step};
use crate::plugin_host::SetOwner;

const MS: u64 = 1_000;

fn config(center: u8, n: usize) -> CenterConfig {
    CenterConfig { gap_slots: 16, finalizer_window_seqs: 16, ..CenterConfig::new(CenterId(center), n) }
}

fn eur() -> Currency {
    Currency::new(b"EUR").unwrap_or_else(|e| panic!("{e}"))
}

/// A journal: two accounts opened and funded, then transfers; entry `k` comes in through
/// center `k % 3 + 1` (its origin) with a bmi.
fn journal(len: u64) -> Vec<Entry> {
    (1..=len)
        .map(|seq| {
            let payload = match seq {
                1 => Payload::AccountOpen { account: AccountId(1), currency: eur() },
                2 => Payload::AccountOpen { account: AccountId(2), currency: eur() },
                3 => Payload::AccountFund { account: AccountId(1), amount_minor: 1_000 },
                _ => Payload::Transfer(Transfer {
                    debtor: AccountId(1 + seq % 2),
                    creditor: AccountId(2 - seq % 2),
                    amount_minor: 1,
                    currency: eur(),
                }),
            };
            let bmi = Bmi::numbered("E", seq).unwrap_or_else(|e| panic!("{e}"));
            Entry {
                seq,
                epoch: 1,
                timestamp_us: seq,
                origin: CenterId::from_index(seq as usize % 3),
                bmi,
                payload,
            }
        })
        .collect()
}

/// A plugin that emits one effect per command of its own (and keeps it pending until a later
/// command names it), so liveness and ownership show in the outputs.
#[derive(Default)]
struct Echo {
    pending: Vec<u64>,
}

impl Plugin for Echo {
    const KIND: PluginKind = PluginKind::Matching;
    fn apply(&mut self, entry: &Entry, step: &mut Step<'_>) {
        if let Payload::Plugin(c) = &entry.payload {
            if c.op == 1 {
                let effect_id = Effect::id_for(entry.seq, 0);
                self.pending.push(effect_id);
                step.effects().push(Effect { plugin: Self::KIND, effect_id, op: 1, body: Vec::new() });
            }
        }
    }
    fn state_hash(&self) -> u64 {
        self.pending.iter().fold(7, |h, p| crate::hash::fold(h, *p))
    }
    fn digest(&self) -> u64 {
        self.pending.len() as u64
    }
    fn pending_effects(&self, out: &mut Vec<Effect>) {
        out.extend(self.pending.iter().map(|&effect_id| Effect {
            plugin: Self::KIND,
            effect_id,
            op: 1,
            body: Vec::new(),
        }));
    }
    fn encode(&self, out: &mut Vec<u8>) {
        for p in &self.pending {
            out.extend_from_slice(&p.to_le_bytes());
        }
    }
    fn decode(buf: &[u8]) -> Result<Self, PluginDecodeError> {
        let pending =
            buf.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8]))).collect();
        Ok(Echo { pending })
    }
}

struct Cluster {
    journal: Vec<Entry>,
    /// The ack stream: (from, acks), position = index.
    stream: Vec<(CenterId, Vec<Applied>)>,
    centers: Vec<Center>,
    /// Each center's next position in the stream.
    read: Vec<u64>,
    /// Each center's own committed acks (what it would re-publish from its store).
    committed: Vec<Vec<Applied>>,
    notices: Vec<Vec<Notice>>,
    effects: Vec<Vec<Effect>>,
    commands: Vec<Command>,
    pulls: Vec<Vec<Pull>>,
    alarms: Vec<Alarm>,
    rewinds: Vec<u64>,
    reacks: Vec<Seq>,
    republished: Vec<(Seq, Seq)>,
    /// Hold commits instead of answering them.
    hold_commits: bool,
    held: Vec<Vec<Commit>>,
    /// Drop the ack messages of this center instead of appending them to the stream.
    lose_acks_of: Option<usize>,
    now: u64,
}

impl Cluster {
    fn new(n: usize, len: u64, make: impl Fn(u8) -> CenterConfig) -> Self {
        let centers = (1..=n as u8)
            .map(|c| {
                let config = make(c);
                let host = PluginHost::empty(CenterId(c));
                Center::new(config.clone(), Restore::fresh(&config, host), 0)
            })
            .collect();
        Cluster {
            journal: journal(len),
            stream: Vec::new(),
            centers,
            read: vec![0; n],
            committed: vec![Vec::new(); n],
            notices: vec![Vec::new(); n],
            effects: vec![Vec::new(); n],
            commands: Vec::new(),
            pulls: vec![Vec::new(); n],
            alarms: Vec::new(),
            rewinds: Vec::new(),
            reacks: Vec::new(),
            republished: Vec::new(),
            hold_commits: false,
            held: (0..n).map(|_| Vec::new()).collect(),
            lose_acks_of: None,
            now: 0,
        }
    }

    fn deliver(&mut self, i: usize, seqs: impl IntoIterator<Item = Seq>) {
        let entries: Vec<(Entry, u64)> =
            seqs.into_iter().map(|s| (self.journal[(s - 1) as usize].clone(), 0)).collect();
        self.centers[i].handle_entries(entries, None, self.now);
        self.pump(i);
    }

    /// Drains center `i`'s outputs into the world: commits answered, acks published, notices
    /// confirmed, pulls served from the journal, rewinds applied to its read position.
    fn pump(&mut self, i: usize) {
        loop {
            let mut out = Outputs::default();
            self.centers[i].poll_output(&mut out);
            if out.is_empty() {
                return;
            }
            self.take(i, out);
        }
    }

    fn take(&mut self, i: usize, mut out: Outputs) {
        for commit in out.commits.drain(..) {
            if self.hold_commits {
                self.held[i].push(commit);
            } else if let Some(last) = commit.seq_last() {
                self.committed[i].extend(commit.applied.iter().copied());
                self.centers[i].handle_committed(last);
            }
        }
        if !out.acks.is_empty() && self.lose_acks_of != Some(i) {
            self.stream.push((CenterId::from_index(i), out.acks.clone()));
        }
        if let Some((from, through)) = out.republish {
            self.republished.push((from, through));
            let again: Vec<Applied> =
                self.committed[i].iter().filter(|a| (from..=through).contains(&a.seq)).copied().collect();
            if !again.is_empty() {
                self.stream.push((CenterId::from_index(i), again));
            }
        }
        if let Some(from) = out.reack_from {
            self.reacks.push(from);
            let again: Vec<Applied> = self.committed[i].iter().filter(|a| a.seq >= from).copied().collect();
            if !again.is_empty() {
                self.stream.push((CenterId::from_index(i), again));
            }
        }
        if let Some(to) = out.ack_rewind {
            self.rewinds.push(to);
            self.read[i] = to;
        }
        if let Some(last) = out.notices.last().map(|n| n.seq) {
            self.notices[i].extend(out.notices.iter().copied());
            self.centers[i].handle_announced(last);
        }
        self.effects[i].append(&mut out.effects);
        self.commands.append(&mut out.commands);
        self.alarms.append(&mut out.alarms);
        self.pulls[i].extend(out.pulls.iter().copied());
        for p in out.pulls {
            let to = p.to.min(self.journal.len() as u64);
            self.deliver(i, p.from..=to);
        }
        let _ = out.checkpoint_due;
    }

    fn read_acks(&mut self, i: usize) {
        while (self.read[i] as usize) < self.stream.len() {
            let pos = self.read[i];
            self.read[i] += 1;
            let (from, acks) = self.stream[pos as usize].clone();
            self.centers[i].handle_acks(from, &acks, pos, self.now);
            self.pump(i);
        }
    }

    fn settle(&mut self) {
        for _ in 0..20 {
            for i in 0..self.centers.len() {
                self.read_acks(i);
            }
        }
    }

    fn tick(&mut self, us: u64) {
        self.now += us;
        for i in 0..self.centers.len() {
            self.centers[i].handle_timeout(self.now);
            self.pump(i);
        }
    }
}

#[test]
fn three_centers_finalize_and_each_origin_announces_its_own_entries_once() {
    let mut c = Cluster::new(3, 30, |i| config(i, 3));
    for i in 0..3 {
        c.deliver(i, 1..=30);
    }
    c.settle();
    for i in 0..3 {
        assert_eq!(c.centers[i].seq_applied(), 30);
        assert_eq!(c.centers[i].seq_unfinal_first(), 31, "DC{} finalized everything", i + 1);
        let seqs: Vec<Seq> = c.notices[i].iter().map(|n| n.seq).collect();
        let own: Vec<Seq> = (1..=30).filter(|s| *s as usize % 3 == i).collect();
        assert_eq!(seqs, own, "DC{} announces exactly its own entries, once, in order", i + 1);
    }
    assert_eq!(c.centers[0].ledger().state_hash(), c.centers[2].ledger().state_hash());
    assert!(c.alarms.is_empty());
}

#[test]
fn acks_wait_for_the_commit_and_notices_for_finality_and_the_commit() {
    let mut c = Cluster::new(3, 9, |i| config(i, 3));
    c.hold_commits = true;
    for i in 0..3 {
        c.deliver(i, 1..=9);
    }
    c.settle();
    assert!(c.stream.is_empty(), "nothing is acked before it is durable");
    assert_eq!(c.held[0].len(), 1);
    assert_eq!(c.held[0][0].applied.len(), 9);
    // DC2 and DC3 commit: finality at DC1 without DC1's own commit.
    for i in 1..3 {
        let commit = c.held[i].remove(0);
        c.centers[i].handle_committed(commit.seq_last().unwrap_or(0));
        c.pump(i);
    }
    c.settle();
    assert_eq!(c.centers[0].seq_unfinal_first(), 10, "final by DC2 and DC3");
    assert!(c.notices[0].is_empty(), "DC1 announces only what it committed itself");
    let commit = c.held[0].remove(0);
    c.centers[0].handle_committed(commit.seq_last().unwrap_or(0));
    c.pump(0);
    assert_eq!(c.notices[0].iter().map(|n| n.seq).collect::<Vec<_>>(), vec![3, 6, 9]);
}

#[test]
fn a_hole_is_pulled_after_the_gap_timeout_never_skipped() {
    let mut c = Cluster::new(1, 10, |i| config(i, 1));
    c.centers[0].handle_entries(
        (1..=10).filter(|s| *s != 4 && *s != 5).map(|s| (c.journal[s as usize - 1].clone(), 0)),
        None,
        0,
    );
    c.pump(0);
    assert_eq!(c.centers[0].seq_applied(), 3, "applied up to the hole, not past it");
    assert!(c.pulls[0].is_empty(), "a fresh hole is only timed");
    c.tick(limits::GAP_TIMEOUT_US / 2);
    assert!(c.pulls[0].is_empty());
    c.tick(limits::GAP_TIMEOUT_US);
    assert_eq!(c.pulls[0], vec![Pull { from: 4, to: 10, why: PullReason::GapTimeout }]);
    assert_eq!(c.centers[0].seq_applied(), 10);
}

#[test]
fn entries_without_room_are_dropped_and_pulled_once_the_hole_fills() {
    let mut c = Cluster::new(1, 60, |i| config(i, 1));
    // Seq 1 is lost; 2..=60 do not fit a 16-slot buffer.
    c.centers[0].handle_entries((2..=60).map(|s| (c.journal[s as usize - 1].clone(), 0)), None, 0);
    c.pump(0);
    assert!(c.centers[0].stats().entries_dropped_for_room > 0);
    // No gap timeout: entries were dropped, so the hole blocks a full buffer — pulled at once,
    // then the dropped ones, a buffer's worth at a time.
    assert_eq!(c.centers[0].seq_applied(), 60, "the hole, then the dropped entries, pulled");
    assert_eq!(c.pulls[0][0], Pull { from: 1, to: 16, why: PullReason::Overflow });
    assert!(c.pulls[0].iter().all(|p| p.why == PullReason::Overflow && p.to - p.from < 16));
}

#[test]
fn a_lost_tail_is_pulled_once_the_journal_is_quiet() {
    let mut c = Cluster::new(3, 12, |i| config(i, 3));
    for i in 0..3 {
        c.deliver(i, 1..=if i == 2 { 8 } else { 12 });
    }
    c.settle();
    assert_eq!(c.centers[2].seq_applied(), 8, "DC3 lost seqs 9..=12: nothing follows them");
    c.tick(limits::GAP_TIMEOUT_US / 2);
    assert!(c.pulls[2].is_empty(), "not while the journal may still bring them");
    c.tick(limits::GAP_TIMEOUT_US);
    assert_eq!(c.pulls[2], vec![Pull { from: 9, to: 12, why: PullReason::LostTail }]);
    assert_eq!(c.centers[2].seq_applied(), 12);
}

/// DC3 is down; DC1 far behind DC2 (more than a window): DC2's acks beyond DC1's window are
/// dropped, then read again as finality reaches them — the production deadlock of 2026-12-01
/// cannot stand here.
#[test]
fn acks_beyond_the_window_are_dropped_then_read_again_and_finality_completes() {
    let mut c = Cluster::new(3, 80, |i| config(i, 3));
    c.deliver(1, 1..=80); // DC2 runs ahead: its acks reach seq 80
    c.read_acks(0);
    assert!(c.centers[0].stats().acks_dropped_beyond_window > 0, "beyond DC1's 16-seq window");
    // DC1 catches up slowly, a few entries at a time.
    for chunk in (1..=80).collect::<Vec<Seq>>().chunks(5) {
        c.deliver(0, chunk.iter().copied());
        c.read_acks(0);
        c.read_acks(1);
    }
    assert!(!c.rewinds.is_empty(), "the stream was read again");
    assert_eq!(c.centers[0].seq_unfinal_first(), 81, "DC1 finalized everything with DC2");
    assert_eq!(c.centers[1].seq_unfinal_first(), 81);
    assert_eq!(c.centers[0].progress().ack_next, c.stream.len() as u64, "nothing left open to resume from");
}

#[test]
fn finality_standing_still_asks_for_acks_again_and_recovers_a_lost_ack_message() {
    let mut c = Cluster::new(3, 6, |i| config(i, 3));
    c.lose_acks_of = Some(1); // DC2's ack messages are lost by the stream
    c.deliver(0, 1..=6);
    c.deliver(1, 1..=6);
    c.settle();
    assert_eq!(c.centers[0].seq_unfinal_first(), 1, "DC3 is down and DC2's acks were lost");
    c.lose_acks_of = None;
    c.tick(limits::REACK_AFTER_US - MS);
    assert!(c.reacks.is_empty());
    c.tick(2 * MS);
    // DC3 had pulled the journal as a lost tail meanwhile (DC1's acks told it how far it went).
    assert_eq!(c.reacks, vec![1, 1, 1], "every center stood at seq 1 with it committed");
    c.settle();
    assert_eq!(c.centers[0].seq_unfinal_first(), 7);
    assert_eq!(c.centers[1].seq_unfinal_first(), 7);
}

/// A stall reads the stream again from the resume position, but not again before that re-read
/// got back to where it began: a long stream re-read slower than the stall timer would
/// otherwise be re-read from its start for ever, never reaching the acks published again at its
/// end (a livelock the simulator found). Re-acks go on regardless.
#[test]
fn a_stall_reads_the_stream_again_only_once_the_last_re_read_got_back() {
    let mut c = Cluster::new(3, 6, |i| config(i, 3));
    c.deliver(0, 1..=6); // DC2 and DC3 are down: DC1's finality stands still
    c.read_acks(0);
    let read_to = c.read[0];
    assert!(read_to > 0);
    c.tick(limits::REACK_AFTER_US + MS);
    let s = c.centers[0].stats();
    assert_eq!((s.reacks, s.ack_rewinds), (1, 1));
    assert_eq!(c.read[0], 0, "read again from the resume position");
    // Stalled again before the reader got back to `read_to`: acks again, no second rewind.
    c.tick(limits::REACK_AFTER_US + MS);
    let s = c.centers[0].stats();
    assert_eq!((s.reacks, s.ack_rewinds), (2, 1));
    // Once the re-read got through, the next stall reads the stream again.
    c.read_acks(0);
    assert!(c.read[0] >= read_to);
    c.tick(limits::REACK_AFTER_US + MS);
    let s = c.centers[0].stats();
    assert_eq!((s.reacks, s.ack_rewinds), (3, 2));
}

#[test]
fn a_restart_resumes_from_the_persisted_progress_and_declares_nothing_twice() {
    let mut c = Cluster::new(3, 20, |i| config(i, 3));
    for i in 0..3 {
        c.deliver(i, 1..=20);
    }
    c.settle();
    let p = c.centers[0].progress();
    assert_eq!((p.seq_unfinal_first, p.ack_next), (21, c.stream.len() as u64));
    // DC1 restarts from its durable state with the finality position it persisted.
    let cfg = config(1, 3);
    let ledger = c.centers[0].ledger().clone();
    let restore = Restore {
        ledger,
        host: PluginHost::empty(CenterId(1)),
        finalizer: Finalizer::with_window(3, cfg.finalizer_window_seqs, p.seq_unfinal_first),
        awaiting: Vec::new(),
        journal_next: None,
        ack_next: p.ack_next,
        catch_up_seq: Some(20),
        acks_published_through: None,
    };
    c.centers[0] = Center::new(cfg, restore, c.now);
    c.read[0] = p.ack_next;
    for i in 1..3 {
        c.deliver(i, std::iter::empty()); // nothing new
    }
    c.settle();
    assert_eq!(c.centers[0].seq_unfinal_first(), 21);
    assert_eq!(c.centers[0].finalizer().finalized_total(), 0, "nothing below the persisted position again");
}

#[test]
fn divergence_halts_with_an_alarm_and_stops_the_notices() {
    let mut c = Cluster::new(3, 6, |i| config(i, 3));
    c.deliver(0, 1..=6);
    // A forged ack of DC2 with another state hash at seq 1.
    let bad = Applied { seq: 1, outcome: Outcome::Accepted, state_hash: 12345 };
    c.stream.push((CenterId(2), vec![bad]));
    c.deliver(1, 1..=6);
    c.deliver(2, 1..=6);
    c.settle();
    assert!(
        matches!(c.alarms.first(), Some(Alarm::Divergence { seq: 1, center: CenterId(2), .. })),
        "{:?}",
        c.alarms
    );
    assert!(c.centers[0].finalizer().is_halted());
    assert!(c.notices.iter().all(|n| n.is_empty()), "nothing announced past a divergence");
}

fn with_echo(i: u8) -> PluginHost {
    PluginHost::new(CenterId(i), vec![Box::new(Echo::default())]).unwrap_or_else(|e| panic!("{e}"))
}

fn echo_entry(seq: Seq) -> Entry {
    let c = PluginCommand { plugin: PluginKind::Matching, op: 1, body: Vec::new() };
    Entry {
        seq,
        epoch: 1,
        timestamp_us: seq,
        origin: CenterId(1),
        bmi: Bmi::NONE,
        payload: Payload::Plugin(c),
    }
}

#[test]
fn plugins_go_live_once_caught_up_and_only_the_owner_executes() {
    let journal: Vec<Entry> = (1..=4).map(echo_entry).collect();
    let mk = |i: u8| {
        let cfg = config(i, 3);
        let mut r = Restore::fresh(&cfg, with_echo(i));
        r.catch_up_seq = Some(3);
        Center::new(cfg, r, 0)
    };
    let (mut dc1, mut dc2) = (mk(1), mk(2));
    let mut out = Outputs::default();
    dc1.handle_entries(journal[..2].iter().map(|e| (e.clone(), 0)), None, 0);
    dc1.poll_output(&mut out);
    assert!(!dc1.is_live() && out.effects.is_empty(), "replaying: nothing executed");
    dc1.handle_entries(journal[2..].iter().map(|e| (e.clone(), 0)), None, 0);
    dc1.poll_output(&mut out);
    assert!(dc1.is_live());
    assert_eq!(out.effects.len(), 4, "everything pending, then the new one");
    out.clear();
    dc2.handle_entries(journal.iter().map(|e| (e.clone(), 0)), None, 0);
    dc2.poll_output(&mut out);
    assert!(dc2.is_live() && out.effects.is_empty(), "DC2 does not own the plugin");
}

/// The owner DC1 goes silent; DC2 (the lowest other center whose acks advance) proposes itself,
/// DC3 does not; DC2 proposes that term again only after twice the silence.
#[test]
fn the_owner_failure_detector_proposes_the_lowest_live_center() {
    let silence = limits::OWNER_SILENCE_US;
    let mk = |i: u8| {
        let cfg = config(i, 3);
        Center::new(cfg.clone(), Restore::fresh(&cfg, with_echo(i)), 0)
    };
    let mut centers = [mk(1), mk(2), mk(3)];
    let mut seq = 0;
    let mut position = 0;
    // Time passes by `step`: every center applies one more entry and commits it; only DC2 and
    // DC3 ack it (DC1's acks never reach anyone); then who proposes.
    let mut step = |centers: &mut [Center; 3], now: u64| {
        seq += 1;
        let mut who = Vec::new();
        for c in centers.iter_mut() {
            c.handle_entries([(echo_entry(seq), 0)], None, now);
            let mut out = Outputs::default();
            c.poll_output(&mut out);
            c.handle_committed(seq);
        }
        for c in centers.iter_mut() {
            for from in [2u8, 3] {
                let ack = Applied { seq, outcome: Outcome::Accepted, state_hash: 0 };
                c.handle_acks(CenterId(from), &[ack], position, now);
                position += 1;
            }
            c.handle_timeout(now);
            let mut out = Outputs::default();
            c.poll_output(&mut out);
            who.extend(out.commands.iter().map(|cmd| (c.id(), cmd.bmi.to_string())));
        }
        who
    };
    let bmi = SetOwner::bmi(PluginKind::Matching, 1).map(|b| b.to_string()).unwrap_or_default();
    let mut proposals = Vec::new();
    for k in 1..=41u64 {
        let now = k * silence / 8;
        for (id, b) in step(&mut centers, now) {
            proposals.push((now, id, b));
        }
    }
    // Behind from the first entry (at 1/8): silent a silence later, proposed again every 2.
    let expected: Vec<(u64, CenterId, String)> =
        [9u64, 25, 41].iter().map(|k| (k * silence / 8, CenterId(2), bmi.clone())).collect();
    assert_eq!(proposals, expected, "DC2 and only DC2, again only after twice the silence");
}

/// Nothing sequenced for many silences (no leader), then entries again: the first center to ack
/// does not take the others for silent — they stood still, not behind. Only once DC1 (the
/// owner) stays behind a whole silence does DC2 propose; DC3 never does.
#[test]
fn a_pause_of_the_whole_journal_silences_nobody() {
    let silence = limits::OWNER_SILENCE_US;
    let mk = |i: u8| {
        let cfg = config(i, 3);
        Center::new(cfg.clone(), Restore::fresh(&cfg, with_echo(i)), 0)
    };
    let mut centers = [mk(1), mk(2), mk(3)];
    let mut position = 0;
    // Entry `seq` at `now`: every center applies and commits it, `ackers` ack it in that order,
    // with a timeout after each ack; the proposals made.
    let mut step = |centers: &mut [Center; 3], seq: Seq, now: u64, ackers: &[u8]| {
        let mut who = Vec::new();
        for c in centers.iter_mut() {
            c.handle_entries([(echo_entry(seq), 0)], None, now);
            let mut out = Outputs::default();
            c.poll_output(&mut out);
            c.handle_committed(seq);
        }
        for (i, from) in ackers.iter().enumerate() {
            let at = now + i as u64 * 1_000;
            for c in centers.iter_mut() {
                let ack = Applied { seq, outcome: Outcome::Accepted, state_hash: 0 };
                c.handle_acks(CenterId(*from), &[ack], position, at);
                c.handle_timeout(at);
                let mut out = Outputs::default();
                c.poll_output(&mut out);
                who.extend(out.commands.iter().map(|_| c.id()));
            }
            position += 1;
        }
        who
    };
    let mut proposals = Vec::new();
    for seq in 1..=5 {
        proposals.extend(step(&mut centers, seq, seq * 1_000, &[1, 2, 3]));
    }
    // Ten silences with nothing sequenced, then DC3's ack arrives before the others'.
    let back = 10 * silence;
    proposals.extend(step(&mut centers, 6, back, &[3, 2, 1]));
    assert_eq!(proposals, Vec::<CenterId>::new(), "nobody stood behind: nobody proposes");
    // From seq 7 on DC1 is gone: DC2 proposes once DC1 has stood behind a whole silence.
    let mut seq = 7;
    let mut now = back;
    while proposals.is_empty() && now < back + 4 * silence {
        now += silence / 8;
        proposals.extend(step(&mut centers, seq, now, &[3, 2]));
        seq += 1;
    }
    assert_eq!(proposals, vec![CenterId(2)], "DC2 and only DC2");
    assert!(now >= back + silence, "not before DC1 stood behind a whole silence");
}

#[test]
fn a_checkpoint_is_due_after_the_interval() {
    let cfg = CenterConfig { checkpoint_interval_entries: Some(10), commit_on_apply: true, ..config(1, 1) };
    let mut center = Center::new(cfg.clone(), Restore::fresh(&cfg, PluginHost::empty(CenterId(1))), 0);
    let j = journal(25);
    let mut out = Outputs::default();
    center.handle_entries(j[..9].iter().map(|e| (e.clone(), 0)), None, 0);
    center.poll_output(&mut out);
    assert!(!out.checkpoint_due);
    assert_eq!(out.acks.len(), 9, "the journal is the commit: acks at once");
    center.handle_entries(j[9..12].iter().map(|e| (e.clone(), 0)), None, 0);
    center.poll_output(&mut out);
    assert!(out.checkpoint_due);
    center.checkpoint_taken();
    out.clear();
    center.handle_entries(j[12..].iter().map(|e| (e.clone(), 0)), None, 0);
    center.poll_output(&mut out);
    assert!(out.checkpoint_due && center.stats().checkpoints == 1);
}

#[test]
fn commits_merge_keeping_the_newest_rows_and_all_progress() {
    let cfg = CenterConfig { commit_rows: true, ..config(1, 3) };
    let mut center = Center::new(cfg.clone(), Restore::fresh(&cfg, PluginHost::empty(CenterId(1))), 0);
    let j = journal(8);
    let mut out = Outputs::default();
    center.handle_entries(j[..5].iter().map(|e| (e.clone(), 0)), Some(0), 0);
    center.poll_output(&mut out);
    center.handle_entries(j[5..].iter().map(|e| (e.clone(), 0)), Some(1), 0);
    center.poll_output(&mut out);
    let mut commits = std::mem::take(&mut out.commits).into_iter();
    let mut merged = commits.next().unwrap_or_default();
    for c in commits {
        merged.merge(c);
    }
    assert_eq!(merged.applied.len(), 8);
    assert_eq!(merged.entries.len(), 8);
    assert_eq!(merged.journal_next, Some(2));
    let balances: Vec<(u64, u64)> =
        merged.changed.accounts.iter().map(|a| (a.id.0, a.balance_minor)).collect();
    let l = center.ledger();
    let now: Vec<(u64, u64)> = l.accounts().iter().map(|a| (a.id.0, a.balance_minor)).collect();
    assert_eq!(balances, now, "each account once, as it is now");
}

/// A driver sleeps until `poll_timeout`: a center with nothing pending must not ask to be woken
/// at once again and again (the production center task spun at 100 % of a core when idle).
#[test]
fn an_idle_center_asks_for_no_timeout_it_has_just_had() {
    let mut c = Cluster::new(3, 9, |i| config(i, 3));
    for i in 0..3 {
        c.deliver(i, 1..=9);
    }
    c.settle();
    // Long after every timer (gap, stall, owner silence) expired, with nothing left to do.
    c.tick(10 * limits::OWNER_SILENCE_US);
    for center in &c.centers {
        assert!(
            center.poll_timeout() > c.now,
            "{} asks to be woken at {} though it was just woken at {}",
            center.id(),
            center.poll_timeout(),
            c.now
        );
    }
    // An expired rule whose condition may still change is looked at again, soon.
    assert!(c.centers[0].poll_timeout() <= c.now + limits::GAP_TIMEOUT_US);
}

/// A center that committed seqs and stopped before their acks went out (or whose ack messages
/// were lost) asks for its acks again as it restarts, not only once finality has stood still
/// for `REACK_AFTER_US`: with one center down, finality needs them.
#[test]
fn a_restart_publishes_its_committed_unfinal_acks_again_at_once() {
    let mut c = Cluster::new(3, 6, |i| config(i, 3));
    c.lose_acks_of = Some(0); // DC1 "crashes" between its commits and its acks
    c.deliver(0, 1..=6);
    c.deliver(1, 1..=6);
    c.settle();
    assert_eq!(c.centers[1].seq_unfinal_first(), 1, "DC3 is down and DC1's acks never went out");
    c.lose_acks_of = None;
    let cfg = config(1, 3);
    let restore = Restore {
        ledger: c.centers[0].ledger().clone(),
        host: PluginHost::empty(CenterId(1)),
        finalizer: Finalizer::with_window(3, cfg.finalizer_window_seqs, 1),
        awaiting: Vec::new(),
        journal_next: None,
        ack_next: 0,
        catch_up_seq: Some(6),
        acks_published_through: None,
    };
    c.centers[0] = Center::new(cfg, restore, c.now);
    c.read[0] = 0;
    c.pump(0);
    assert_eq!(
        c.republished,
        vec![(1, 6)],
        "the restarted DC1 publishes its acks from the oldest unfinal seq"
    );
    assert!(c.reacks.is_empty(), "a restart is not a stall");
    c.settle();
    assert_eq!(c.centers[1].seq_unfinal_first(), 7, "final with DC1 and DC2, no stall waited for");
    assert_eq!(c.centers[0].seq_unfinal_first(), 7);
    assert_eq!(c.centers[0].stats().reacks, 0, "a restart is not a stall");
}

/// What a restart publishes again is decided here, from the driver's durable mark of its acks
/// in the stream: everything after the mark (acks that went only by a faster path may have made
/// those seqs final at the others while a center reading the stream still waits for them), and
/// every unfinal one whatever the mark says; nothing when the mark and finality cover all. The
/// mark a driver starts counting its confirmed acks from is the core's answer too.
#[test]
fn a_restart_republishes_from_the_lower_of_its_published_mark_and_finality() {
    let mut c = Cluster::new(3, 6, |i| config(i, 3));
    for i in 0..3 {
        c.deliver(i, 1..=6);
    }
    c.settle();
    assert_eq!(c.centers[0].seq_unfinal_first(), 7);
    let restart = |c: &mut Cluster, unfinal: Seq, mark: Option<Seq>| {
        let cfg = config(1, 3);
        let restore = Restore {
            ledger: c.centers[0].ledger().clone(),
            host: PluginHost::empty(CenterId(1)),
            finalizer: Finalizer::with_window(3, cfg.finalizer_window_seqs, unfinal),
            awaiting: Vec::new(),
            journal_next: None,
            ack_next: 0,
            catch_up_seq: Some(6),
            acks_published_through: mark,
        };
        let mut center = Center::new(cfg, restore, c.now);
        let mut out = Outputs::default();
        center.poll_output(&mut out);
        (out.republish, center.acks_published_at_start())
    };
    // All final, acks in the stream through 3 only (the rest went by push): 4..=6 again.
    assert_eq!(restart(&mut c, 7, Some(3)), (Some((4, 6)), 3));
    // Final through 2, mark at 4: from the unfinal one; the mark stays where it was.
    assert_eq!(restart(&mut c, 3, Some(4)), (Some((3, 6)), 4));
    // No mark: the acks before the first unfinal seq are taken to be in the stream.
    assert_eq!(restart(&mut c, 5, None), (Some((5, 6)), 4));
    // All final and all in the stream: nothing.
    assert_eq!(restart(&mut c, 7, Some(6)), (None, 6));
    assert_eq!(restart(&mut c, 7, None), (None, 6));
    // A mark beyond what is applied (never stored so: the mark is committed with the watermark)
    // counts no more than is applied.
    assert_eq!(restart(&mut c, 7, Some(9)), (None, 6));
}

#[test]
fn pushed_acks_finalize_at_once_and_leave_the_ack_stream_its_own_bookkeeping() {
    let mut c = Cluster::new(3, 30, |i| config(i, 3));
    for i in 0..3 {
        c.deliver(i, 1..=30);
    }
    // Every center committed and published its acks; nobody has read the stream yet.
    assert_eq!(c.stream.len(), 3);
    let published = c.stream.clone();
    for i in 0..3 {
        assert_eq!(c.centers[i].seq_unfinal_first(), 1, "nothing final before any ack is read");
        for (from, acks) in &published {
            c.centers[i].handle_acks_pushed(*from, acks, c.now);
            c.pump(i);
        }
        assert_eq!(c.centers[i].seq_unfinal_first(), 31, "DC{}: the pushed acks finalize", i + 1);
        // The stream was not read: a restart must still read it from its start.
        assert_eq!(c.centers[i].progress().ack_next, 0, "DC{}: pushed acks move no stream position", i + 1);
    }
    let notices: Vec<usize> = c.notices.iter().map(Vec::len).collect();
    // The stream's copies come later: duplicates, nothing counted twice, nothing announced twice.
    c.settle();
    for (i, announced) in notices.iter().enumerate() {
        assert_eq!(c.centers[i].seq_unfinal_first(), 31);
        assert_eq!(c.notices[i].len(), *announced, "DC{} announced nothing again", i + 1);
        assert_eq!(c.centers[i].progress().ack_next, 3, "DC{}: the stream read through", i + 1);
    }
    assert!(c.alarms.is_empty(), "{:?}", c.alarms);
}

#[test]
fn a_pushed_ack_beyond_the_window_is_not_counted_and_asks_for_no_rewind() {
    let window = 8;
    let mut c = Cluster::new(3, 30, |i| CenterConfig { finalizer_window_seqs: window, ..config(i, 3) });
    c.deliver(1, 1..=30);
    let (from, acks) = c.stream.last().cloned().expect("DC2 published its acks");
    c.centers[0].handle_acks_pushed(from, &acks, c.now);
    c.pump(0);
    assert_eq!(c.rewinds, Vec::<u64>::new(), "a pushed ack never makes the stream be read again");
    assert_eq!(c.centers[0].stats().acks_dropped_beyond_window, 0, "the stream's bookkeeping only");
    // DC1 and DC3 apply too: the stream brings everything, all final.
    c.deliver(0, 1..=30);
    c.deliver(2, 1..=30);
    c.settle();
    assert_eq!(c.centers[0].seq_unfinal_first(), 31);
}
