//! The driver of each simulated center: what arrives goes into its [`Center`], what the center
//! asks for is carried out — and nothing is decided here that the center decides in an engine.
//!
//! Small windows and short timeouts ([`center_config`]) make the center's rules fire often: a
//! 32-slot gap buffer, a 64-seq tally window (a center reading acks of a center more than 64
//! seqs ahead drops them and asks to read the stream again), a 10 ms gap timeout, re-acks after
//! 30 ms of finality standing still, an owner suspected after 40 ms of silence, a checkpoint
//! every 24 entries.

use super::faults::{
    ACK_LOSS, ACK_READ_DELAY, CENTER_DOWN_US, CHECKPOINT_TORN, DELAY, DROP, DUPLICATE, JOURNAL_FLIP_IN_FLIGHT,
};
use super::{Check, World, ACK_READS_PER_STEP_MAX, IDLE_US};
use crate::center::{Live, Wake};
use crate::checker::Checker;
use crate::network::{Message, Take};
use crate::storage::{decode_checkpoint, decode_entries, encode_checkpoint, flip_bit};
use crate::{Guard, InjectedBug};
use rtgs_core::center::{Awaiting, Center, CenterConfig, Commit, Outputs, Pull, Restore};
use rtgs_core::entry::{CenterId, Entry, Outcome, Payload, RejectReason, Seq};
use rtgs_core::finalizer::{Finalizer, SeqStatus};
use rtgs_core::ledger::{Applied, Ledger};
use rtgs_core::plugin_host::PluginHost;

/// Gap buffer slots: small, so entries are dropped for room and pulled.
pub const GAP_SLOTS: usize = 32;
/// A few network delays: holes and lost tails are pulled often.
const GAP_TIMEOUT_US: u64 = 10_000;
/// Twice the gap buffer (production: four times): a center more than a window behind another
/// drops its acks and reads them again later.
pub const FINALIZER_WINDOW_SEQS: usize = 64;
/// A few gap timeouts.
const REACK_AFTER_US: u64 = 30_000;
const OWNER_SILENCE_US: u64 = 40_000;
const CHECKPOINT_INTERVAL_ENTRIES: u64 = 24;
/// Acks per published message and per re-ack: an eighth and a quarter of the window (as in
/// production, where a message or a merged commit holds far less than a window, and a re-ack
/// publishes a quarter of one).
const ACKS_PER_MESSAGE_MAX: usize = FINALIZER_WINDOW_SEQS / 8;
const REACK_ACKS_MAX: u64 = FINALIZER_WINDOW_SEQS as u64 / 4;

/// The simulator's settings of center `i` (with a guard switched off, if asked).
pub fn center_config(i: usize, center_count: usize, guard_off: Option<Guard>) -> CenterConfig {
    CenterConfig {
        gap_slots: GAP_SLOTS,
        gap_timeout_us: GAP_TIMEOUT_US,
        finalizer_window_seqs: FINALIZER_WINDOW_SEQS,
        reack_after_us: if guard_off == Some(Guard::Reacks) { u64::MAX } else { REACK_AFTER_US },
        owner_silence_us: if guard_off == Some(Guard::OwnerDetector) { u64::MAX } else { OWNER_SILENCE_US },
        commit_on_apply: false,
        // Commits carry the entries: the checker compares them with what was sequenced.
        commit_rows: true,
        checkpoint_interval_entries: Some(CHECKPOINT_INTERVAL_ENTRIES),
        ..CenterConfig::new(CenterId::from_index(i), center_count)
    }
}

impl World {
    fn make_host(&self, id: CenterId) -> Result<PluginHost, String> {
        match &self.plugins {
            Some(p) => PluginHost::new(id, p.make()).map_err(|e| e.to_string()),
            None => Ok(PluginHost::empty(id)),
        }
    }

    // ---- start, crash ----

    /// Starts center `i` from its store: the newest checkpoint that reads back (or nothing: the
    /// journal from the start), the finality progress of its last commit, the notices it owes;
    /// then its catch-up reader reads the published journal from there.
    pub(super) fn start_center(&mut self, i: usize) -> Check {
        let id = self.centers[i].id;
        let n = self.centers.len();
        let config = center_config(i, n, self.config.guard_off);
        let (ledger, host) = self.read_checkpoint(i)?;
        let store = &self.centers[i].store;
        if ledger.seq_applied() > store.committed_through() {
            return Err(format!(
                "{id} restarts from a checkpoint at seq {} beyond its commits ({})",
                ledger.seq_applied(),
                store.committed_through()
            ));
        }
        let progress = store.progress.clone();
        // `FinalizerQuorumOne`: DC1's finalizer counts a quorum of one.
        let tally_centers = if self.bug(InjectedBug::FinalizerQuorumOne) && i == 0 { 1 } else { n };
        let finalizer =
            Finalizer::with_window(tally_centers, FINALIZER_WINDOW_SEQS, progress.seq_unfinal_first);
        let awaiting = self.owed_notices(i, progress.seq_notice_from, ledger.seq_applied())?;
        let seq_applied = ledger.seq_applied();
        let restore = Restore {
            ledger,
            host,
            finalizer,
            awaiting,
            journal_next: None,
            ack_next: progress.ack_next,
            catch_up_seq: Some(self.sequencer.published_seq()),
            // The simulated stream keeps no published mark: the core takes the acks before the
            // first unfinal seq to be there.
            acks_published_through: None,
        };
        let center = Center::new(config, restore, self.now_us);
        let published = self.sequencer.published_frames;
        let first = self.sequencer.store.frame_of(seq_applied + 1).unwrap_or(published);
        self.centers[i].live = Some(Live {
            center,
            ack_next: progress.ack_next,
            ack_paused_until_us: 0,
            commits: Vec::new(),
            catch_up: (first < published).then_some((first, published)),
            frame_max: None,
        });
        self.pump(i)
    }

    /// The newest checkpoint of center `i` that reads back; a fresh state if none does.
    fn read_checkpoint(&mut self, i: usize) -> Result<(Ledger, PluginHost), String> {
        let id = self.centers[i].id;
        for k in (0..self.centers[i].store.checkpoints.len()).rev() {
            let host = self.make_host(id)?;
            match decode_checkpoint(&self.centers[i].store.checkpoints[k], self.verify, host) {
                Ok(state) => return Ok(state),
                Err(_) => self.recoveries.checkpoints_refused += 1,
            }
        }
        if self.centers[i].store.committed_through() > 0 {
            self.recoveries.replays_from_start += 1;
        }
        Ok((Ledger::new(), self.make_host(id)?))
    }

    /// Own-origin entries in `from..=to` (applied in the checkpoint): their notices are owed.
    fn owed_notices(&mut self, i: usize, from: Seq, to: Seq) -> Result<Vec<Awaiting>, String> {
        let id = self.centers[i].id;
        let mut owed = Vec::new();
        for entry in self.read_journal(from, to)? {
            if entry.origin != id || entry.bmi.is_none() || !(from..=to).contains(&entry.seq) {
                continue;
            }
            let Some(ack) = self.centers[i].store.acks.get((entry.seq - 1) as usize) else {
                return Err(format!("{id} has seq {} in its checkpoint but not in its commits", entry.seq));
            };
            owed.push(Awaiting { seq: entry.seq, bmi: entry.bmi, outcome: ack.outcome, submitted_at_us: 0 });
        }
        Ok(owed)
    }

    /// The durable journal's entries of the frames holding `from..=to` (checked reads).
    fn read_journal(&mut self, from: Seq, to: Seq) -> Result<Vec<Entry>, String> {
        let mut out = Vec::new();
        let Some(first) = self.sequencer.store.frame_of(from) else { return Ok(out) };
        let store = &mut self.sequencer.store;
        for k in first..store.frames() {
            if store.seqs(k).0 > to {
                break;
            }
            out.extend(store.read(k, self.verify, &mut self.recoveries.frames_refused)?.1);
        }
        Ok(out)
    }

    /// Crashes center `i` unless that would leave no center up; true if it crashed.
    pub(super) fn try_crash_center(&mut self, i: usize, wake: Wake) -> bool {
        if !self.may_crash(i) {
            return false;
        }
        self.crash_center(i, wake);
        true
    }

    fn may_crash(&self, i: usize) -> bool {
        let up = self.centers.iter().filter(|c| c.is_up()).count();
        self.centers.get(i).is_some_and(|c| c.is_up()) && up > 1
    }

    /// Center `i` loses everything but its store; answers its effects had not journaled die too.
    fn crash_center(&mut self, i: usize, wake: Wake) {
        self.add_center_stats(i);
        self.centers[i].live = None;
        self.centers[i].wake = wake;
        self.faults.counts.center_crashes += 1;
        let before = self.plugin_pending.len();
        self.plugin_pending.retain(|r| r.executed_by != Some(i));
        self.plugin_results_lost += (before - self.plugin_pending.len()) as u64;
    }

    /// Adds what center `i`'s current life counted to the run's recoveries.
    pub(super) fn add_center_stats(&mut self, i: usize) {
        let Some(center) = self.centers[i].center() else { return };
        let s = center.stats();
        let r = &mut self.recoveries;
        r.gap_pulls += s.gap_pulls;
        r.entries_dropped_for_room += s.entries_dropped_for_room;
        r.reacks += s.reacks;
        r.ack_rewinds += s.ack_rewinds;
        r.acks_dropped_beyond_window += s.acks_dropped_beyond_window;
        r.owner_proposals += s.owner_proposals;
        r.notices += s.notices;
    }

    // ---- inputs ----

    /// Takes one due journal message and delivers, drops, delays, duplicates or corrupts it;
    /// false when nothing was due (then the clock moves on).
    pub(super) fn deliver(&mut self) -> Result<bool, String> {
        let (mut message, duplicate) = match self.network.take(&mut self.prng, self.now_us) {
            Take::Empty => {
                // Idle: let time pass (retries, restarts, timeouts, the next tick).
                self.now_us += self.prng.range(IDLE_US.0, IDLE_US.1);
                return Ok(false);
            }
            Take::NotDue { due_us } => {
                self.now_us = self.now_us.max(due_us);
                return Ok(false);
            }
            Take::Message { message, duplicate } => (message, duplicate),
        };
        if self.faults.hit(&mut self.prng, &DROP) {
            self.faults.counts.journal_drops += 1;
            return Ok(true);
        }
        if self.faults.hit(&mut self.prng, &DELAY) {
            self.faults.counts.journal_delays += 1;
            let due = self.delayed();
            self.network.send(due, message);
            return Ok(true);
        }
        if self.faults.hit(&mut self.prng, &DUPLICATE) {
            let due = self.arrival();
            self.network.send_duplicate(due, message.clone());
        }
        if duplicate {
            self.faults.counts.journal_duplicates += 1;
        }
        if self.faults.hit(&mut self.prng, &JOURNAL_FLIP_IN_FLIGHT) {
            flip_bit(&mut message.bytes, &mut self.prng);
            self.faults.counts.journal_bit_flips += 1;
        }
        self.deliver_frame(message)?;
        Ok(true)
    }

    /// A journal frame reaches center `to`'s reader: checked, then handed in; a frame that does
    /// not check is refused and read again from the durable journal.
    fn deliver_frame(&mut self, message: Message) -> Check {
        let Message { to, frame, bytes } = message;
        if !self.centers[to].is_up() {
            return Ok(());
        }
        let Some(entries) = decode_entries(&bytes, self.verify) else {
            self.recoveries.frames_refused += 1;
            let (bytes, _) =
                self.sequencer.store.read(frame, self.verify, &mut self.recoveries.frames_refused)?;
            let due = self.arrival();
            self.network.send(due, Message { to, frame, bytes });
            return Ok(());
        };
        if let Some(live) = self.centers[to].live.as_mut() {
            if live.frame_max.is_some_and(|m| frame < m) {
                self.faults.counts.journal_reorders += 1;
            }
            live.frame_max = live.frame_max.max(Some(frame));
            live.center.handle_entries(entries.into_iter().map(|e| (e, 0)), None, self.now_us);
        }
        self.pump(to)
    }

    /// Every center's reader reads the next ack messages it can read, at their positions.
    pub(super) fn read_acks(&mut self) -> Check {
        for i in 0..self.centers.len() {
            if !self.centers[i].is_up() {
                continue;
            }
            if self.faults.hit(&mut self.prng, &ACK_READ_DELAY) {
                self.faults.counts.ack_read_delays += 1;
                let until = self.delayed();
                if let Some(live) = self.centers[i].live.as_mut() {
                    live.ack_paused_until_us = until;
                }
                continue;
            }
            self.read_acks_of(i)?;
        }
        Ok(())
    }

    fn read_acks_of(&mut self, i: usize) -> Check {
        let only_own = self.bug(InjectedBug::FinalizerQuorumOne) && i == 0;
        // `Guard::AckWindow` off: the old policy, acks beyond the window held.
        let hold_beyond_window = self.guard_off(Guard::AckWindow);
        for _ in 0..ACK_READS_PER_STEP_MAX {
            let Some(live) = self.centers[i].live.as_mut() else { break };
            if self.now_us < live.ack_paused_until_us {
                break;
            }
            let position = live.ack_next;
            let Some(m) = self.acks.readable(position, self.now_us) else { break };
            if hold_beyond_window && m.acks.iter().any(|a| a.seq >= live.center.finalizer().seq_window_end())
            {
                break;
            }
            live.ack_next = position + 1;
            if only_own && m.from != CenterId(1) {
                continue;
            }
            live.center.handle_acks(m.from, &m.acks, position, self.now_us);
            self.pump(i)?;
        }
        Ok(())
    }

    /// Every center whose timeout is due gets `handle_timeout`.
    pub(super) fn poll_timeouts(&mut self) -> Check {
        for i in 0..self.centers.len() {
            let Some(live) = self.centers[i].live.as_mut() else { continue };
            if self.now_us >= live.center.poll_timeout() {
                live.center.handle_timeout(self.now_us);
                self.pump(i)?;
            }
        }
        Ok(())
    }

    /// Catch-up readers after a restart: the next published frames, as far as the center's gap
    /// buffer has room for them (a reader's flow control, not a center's rule).
    pub(super) fn feed_catch_up(&mut self) -> Check {
        for i in 0..self.centers.len() {
            let Some(live) = self.centers[i].live.as_mut() else { continue };
            let Some((mut next, end)) = live.catch_up else { continue };
            let room_end = live.center.seq_next() + GAP_SLOTS as u64 - 1;
            while next < end && self.sequencer.store.seqs(next).0 <= room_end {
                let (bytes, _) =
                    self.sequencer.store.read(next, self.verify, &mut self.recoveries.frames_refused)?;
                let due = self.arrival();
                self.network.send(due, Message { to: i, frame: next, bytes });
                next += 1;
            }
            if let Some(live) = self.centers[i].live.as_mut() {
                live.catch_up = (next < end).then_some((next, end));
            }
        }
        Ok(())
    }

    /// A random center's committer writes what queued up.
    pub(super) fn commit_some(&mut self) -> Check {
        let i = self.prng.below(self.centers.len() as u64) as usize;
        // `AckBeforeCommit`: the acks went out already; the writes lag further.
        if self.bug(InjectedBug::AckBeforeCommit) && !self.prng.chance(1, 4) {
            return Ok(());
        }
        self.write_commits(i)?;
        self.pump(i)
    }

    // ---- outputs ----

    /// Drains center `i`'s outputs into the world until it asks for nothing more.
    fn pump(&mut self, i: usize) -> Check {
        loop {
            let mut out = Outputs::default();
            match self.centers[i].live.as_mut() {
                Some(live) => live.center.poll_output(&mut out),
                None => return Ok(()),
            }
            if out.is_empty() && !out.checkpoint_due {
                return Ok(());
            }
            self.take_outputs(i, out)?;
        }
    }

    fn take_outputs(&mut self, i: usize, mut out: Outputs) -> Check {
        let id = self.centers[i].id;
        if let Some(alarm) = out.alarms.first() {
            return Err(format!("{id}: {alarm}"));
        }
        for mut commit in std::mem::take(&mut out.commits) {
            self.maybe_flip(i, &mut commit.applied);
            self.check_commit(i, &commit)?;
            let last = commit.seq_last();
            let Some(live) = self.centers[i].live.as_mut() else { return Ok(()) };
            live.commits.push(commit);
            if let (true, Some(last)) = (self.config.inject_bug == Some(InjectedBug::AckBeforeCommit), last) {
                live.center.handle_committed(last);
            }
        }
        if !out.acks.is_empty() {
            self.publish_acks(i, std::mem::take(&mut out.acks));
        }
        if let Some((from, through)) = out.republish {
            self.republish(i, from, through);
        }
        if let Some(from) = out.reack_from {
            self.reack(i, from);
        }
        if let (Some(position), Some(live)) = (out.ack_rewind, self.centers[i].live.as_mut()) {
            live.ack_next = position;
        }
        for pull in &out.pulls {
            self.serve_pull(i, *pull)?;
        }
        self.announce(i, &out.notices)?;
        self.execute_effects(i, std::mem::take(&mut out.effects));
        for command in std::mem::take(&mut out.commands) {
            self.push_command(command, Some(i));
        }
        if out.checkpoint_due {
            self.checkpoint(i)?;
        }
        Ok(())
    }

    /// What a commit says: the applied entries are the sequenced ones and agree with every other
    /// center's, and each seq declared final has a quorum behind it and was not durably final
    /// here before.
    fn check_commit(&mut self, i: usize, commit: &Commit) -> Check {
        let id = self.centers[i].id;
        for a in &commit.applied {
            self.checker.on_apply(id, a.seq, a.outcome, a.state_hash)?;
        }
        for e in &commit.entries {
            Checker::check_entry_applied(id, e, &self.sequencer.truth)?;
        }
        let durable: Vec<Seq> = self.centers.iter().map(|c| c.store.committed_through()).collect();
        let durable_final = self.centers[i].store.progress.seq_unfinal_first;
        for &(lo, hi) in &commit.progress.final_ranges {
            for seq in lo..=hi {
                if seq < durable_final {
                    return Err(format!(
                        "finalizer of {id} declared seq {seq} final again (durably final below {durable_final})"
                    ));
                }
                let status = self.centers[i].center().map(|c| c.finalizer().status(seq));
                let outcome = match status {
                    Some(SeqStatus::Final(o)) => Some(o),
                    _ => None,
                };
                self.checker.on_final(id, seq, outcome, &durable)?;
            }
        }
        Ok(())
    }

    /// `InjectedBug::CenterFlipsOutcome`: the second center reports its first accepted transfer
    /// as rejected, in its commit and in every ack of it it publishes.
    fn maybe_flip(&mut self, i: usize, applied: &mut [Applied]) {
        if !self.bug(InjectedBug::CenterFlipsOutcome) || i != 1 % self.centers.len() {
            return;
        }
        for a in applied {
            let is_transfer = self
                .sequencer
                .truth
                .get((a.seq - 1) as usize)
                .is_some_and(|e| matches!(e.payload, Payload::Transfer(_)));
            let first = self.flipped.is_none() && is_transfer && a.outcome == Outcome::Accepted;
            if first || self.flipped == Some(a.seq) {
                a.outcome = Outcome::Rejected(RejectReason::InsufficientFunds);
                self.flipped = Some(a.seq);
            }
        }
    }

    /// Publishes acks of center `i` to the stream, a bounded number per message; a message may
    /// be lost on the way.
    fn publish_acks(&mut self, i: usize, mut acks: Vec<Applied>) {
        let from = self.centers[i].id;
        self.maybe_flip(i, &mut acks);
        for chunk in acks.chunks(ACKS_PER_MESSAGE_MAX) {
            if self.faults.hit(&mut self.prng, &ACK_LOSS) {
                self.faults.counts.ack_losses += 1;
                continue;
            }
            let visible = self.arrival();
            self.acks.append(from, chunk.to_vec(), visible);
        }
    }

    /// Center `i` asked to publish its committed acks from `from` again: read back from its
    /// store, at most `REACK_ACKS_MAX` of them.
    fn reack(&mut self, i: usize, from: Seq) {
        self.republish(i, from, from.saturating_add(REACK_ACKS_MAX - 1));
    }

    /// Center `i`'s committed acks `from..=through`, read back from its store (a restart's
    /// republish: every one; a stall's re-ack: a bounded round).
    fn republish(&mut self, i: usize, from: Seq, through: Seq) {
        let store = &self.centers[i].store;
        let to = store.committed_through().min(through);
        if from == 0 || from > to {
            return;
        }
        let acks = store.acks[(from - 1) as usize..to as usize].to_vec();
        self.publish_acks(i, acks);
    }

    /// Seqs `pull.from..=pull.to` from the durable journal, as the frames holding them.
    fn serve_pull(&mut self, i: usize, pull: Pull) -> Check {
        let Some(first) = self.sequencer.store.frame_of(pull.from) else { return Ok(()) };
        for k in first..self.sequencer.store.frames() {
            if self.sequencer.store.seqs(k).0 > pull.to {
                break;
            }
            let (bytes, _) =
                self.sequencer.store.read(k, self.verify, &mut self.recoveries.frames_refused)?;
            let due = self.arrival();
            self.network.send(due, Message { to: i, frame: k, bytes });
        }
        Ok(())
    }

    /// Notices go to the participants' channel at once; the center hears they arrived.
    fn announce(&mut self, i: usize, notices: &[rtgs_core::client::Notice]) -> Check {
        let Some(last) = notices.last().map(|n| n.seq) else { return Ok(()) };
        for n in notices {
            self.checker.on_notice(n, &self.sequencer.truth)?;
        }
        if let Some(live) = self.centers[i].live.as_mut() {
            live.center.handle_announced(last);
        }
        Ok(())
    }

    /// Writes center `i`'s queued commits as one (merged), then tells the center — unless it
    /// crashes in between: then only a re-ack publishes those acks.
    fn write_commits(&mut self, i: usize) -> Check {
        let id = self.centers[i].id;
        let Some(live) = self.centers[i].live.as_mut() else { return Ok(()) };
        if live.commits.is_empty() {
            return Ok(());
        }
        let mut commits = std::mem::take(&mut live.commits).into_iter();
        let Some(mut merged) = commits.next() else { return Ok(()) };
        for c in commits {
            merged.merge(c);
        }
        self.centers[i].store.write(id, &merged)?;
        if self.crash_point() {
            let wake = self.wake_after(CENTER_DOWN_US);
            if self.try_crash_center(i, wake) {
                return Ok(());
            }
        }
        let told = self.bug(InjectedBug::AckBeforeCommit);
        if let (Some(live), Some(last), false) = (self.centers[i].live.as_mut(), merged.seq_last(), told) {
            live.center.handle_committed(last);
        }
        Ok(())
    }

    /// A checkpoint of what is committed: the queued commits are written first, then the image;
    /// a crash in the middle of the write leaves it torn.
    fn checkpoint(&mut self, i: usize) -> Check {
        self.write_commits(i)?;
        let Some(live) = self.centers[i].live.as_ref() else { return Ok(()) };
        let center = &live.center;
        // (Below the commits while a restarted center replays what it committed before.)
        if center.seq_applied() > self.centers[i].store.committed_through() {
            return Err(format!(
                "{} checkpoints seq {} with commits through {}",
                self.centers[i].id,
                center.seq_applied(),
                self.centers[i].store.committed_through()
            ));
        }
        let mut bytes = encode_checkpoint(center.ledger(), center.host());
        if self.faults.hit(&mut self.prng, &CHECKPOINT_TORN) && self.may_crash(i) {
            bytes.truncate(self.prng.below(bytes.len() as u64) as usize);
            self.centers[i].store.push_checkpoint(bytes);
            self.faults.counts.checkpoint_torn_writes += 1;
            let wake = self.wake_after(CENTER_DOWN_US);
            self.crash_center(i, wake);
            return Ok(());
        }
        self.centers[i].store.push_checkpoint(bytes);
        if let Some(live) = self.centers[i].live.as_mut() {
            live.center.checkpoint_taken();
        }
        Ok(())
    }
}
