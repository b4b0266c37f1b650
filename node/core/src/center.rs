//! The center: one data center's whole state machine, the one type every driver runs.
//!
//! A center is the composition of the core's parts: journal entries go through its gap buffer
//! into its [`Replica`] (ledger + plugin host + ledger intents); what it applied is made durable
//! by its driver (a *commit*) and only then acked; every center's acks are counted by its quorum
//! finalizer; the entries this center is the origin of are announced once final; the owner of a
//! plugin executes its effects. And the rules about *when*: when a hole is pulled from the
//! durable journal, when a lost tail is, what happens to acks beyond the tally window, when
//! finality that stands still asks for acks again, when the plugins go live, when this center
//! proposes itself as a plugin's owner, when a checkpoint is due. All of it is here, driven by
//! `now_us` arguments, so the simulator tests exactly what the engines run (TigerBeetle's VOPR
//! runs the real replica; quinn's tests drive the real `Connection`).
//!
//! # Interface (quinn-proto's shape)
//! Inputs: [`Center::handle_entries`] (journal entries: published, replayed or pulled),
//! [`Center::handle_acks`] (one ack message of any center — its own included — read from the
//! ack stream at a position), [`Center::handle_committed`] (the driver made an applied run
//! durable), [`Center::handle_announced`] (notices reached the participants' channel),
//! [`Center::handle_timeout`]. Outputs: [`Center::poll_output`] into a caller-owned [`Outputs`];
//! [`Center::poll_timeout`] says when to call `handle_timeout` next. A driver loops: feed what
//! arrived, drain the outputs into its I/O, sleep until the next input or timeout. Nothing
//! else decides anything.
//!
//! # The ack stream and its positions
//! A center's acks go out only after their commit, to one ordered stream every center reads
//! (the production engine's `applied` topic; the embedded engine's per-center log of received
//! batches; the simulator's modelled topic). Each message is one center's contiguous acks; the
//! driver hands it in with its *position* in the stream as this center reads it. The center
//! keeps, per message it read, the highest seq it holds, and so knows the position a restart
//! must read again from: the first message that still holds an ack of a seq not yet final
//! (mission.md §2.5: "resume from a point no later than the first ack of the oldest unfinalized
//! seq"). It is part of the finality progress the driver persists ([`Progress::ack_next`]).
//!
//! **Decision: acks beyond the tally window are dropped and read again** ([`Outputs::ack_rewind`]),
//! never held. Holding them needs unbounded memory or stops the reading: with one center down and
//! another more than a window behind the third, the acks finality waited for sat behind a held
//! one and production finality stood for good (`bench/cluster.sh`, 2026-12-01). Dropped, the
//! stream is read again from the first message that had one once finality is within half a
//! window of the lowest of them — every rewind admits at least half a window, and finality never
//! waits on a dropped ack before that (they are all at least a window beyond where finality was).
//!
//! **A restart** asks for its committed acks again at once ([`Outputs::republish`]), from the
//! first one not known to be in the ack stream ([`Restore::acks_published_through`], the driver's
//! durable mark) or the first unfinal one, whichever is lower, through the last applied: a crash
//! between a commit and its acks loses those acks, and acks that went only by a faster path
//! (production's push) made seqs final that a center reading the stream still waits for.
//!
//! **Finality that stands still**: when the oldest unfinal seq has not moved for
//! [`CenterConfig::reack_after_us`] while this center has committed it, the center asks its
//! driver to publish its own committed acks from there again ([`Outputs::reack_from`]: an ack
//! message the stream lost is lost for every finalizer) and reads the stream again from its
//! resume position, as a restart would (an ack it missed comes back too) — but not again before
//! that re-read got back to where it began: a stream longer than the reader gets through in one
//! stall period would otherwise be re-read from the start for ever, never reaching the acks
//! published again at its end. Acks are idempotent, so a false alarm (two centers down) costs a
//! read and some messages.
//!
//! # Gaps and lost tails
//! A hole with later entries waiting longer than the gap timeout is pulled from the durable
//! journal ([`Outputs::pulls`]), never skipped. Entries too far ahead for the gap buffer are
//! dropped and pulled as soon as the hole before them is filled. A lost tail shows no hole
//! (nothing follows it): when the journal has been quiet for the gap timeout while other centers
//! acked seqs this one lacks, those are pulled.
//!
//! # Plugins
//! The host applies every entry after the ledger, its digests folded into the state hash (see
//! [`Replica`]). It goes live — its owner executes effects, starting with everything pending —
//! once the center has caught up with the journal as it stood at start (a seq or a stream
//! position the driver gives), or the journal is quiet with nothing known to be missing. **The
//! owner failure detector**: a live center proposes itself as a plugin's owner (`SetOwner` for
//! the next term, through the sequencer like any command) when the owner is silent — its acks
//! have stood behind what another center acked (or this one committed) for a whole
//! [`CenterConfig::owner_silence_us`] — and this center is the lowest-numbered other one not
//! silent; it proposes the same term again only after twice the silence. Silence is standing
//! behind, not standing still: a journal that pauses (no leader) silences nobody, and the first
//! center to ack after it does not take the others for silent. Concurrent proposals share one `bmi` (the
//! sequencer refuses the second) and the host refuses stale terms, so a wrong suspicion moves
//! ownership needlessly, never to two owners at one seq.
//!
//! **Counters observe, they do not decide**: [`CenterStats`] is written here and read by drivers
//! for status and metrics; no rule reads it back.

use crate::client::Notice;
use crate::entry::{Bmi, CenterId, Command, Entry, Outcome, Seq};
use crate::finalizer::{AckResult, Finality, Finalizer, SeqStatus};
use crate::gap_buffer::{gap_buffer_with_timeout, GapConsumer, GapProducer, Insert};
use crate::ledger::{Applied, ChangedRows, Ledger};
use crate::limits;
use crate::plugin::Effect;
use crate::plugin_host::PluginHost;
use crate::replica::Replica;
use std::collections::VecDeque;
use std::fmt;

/// How many entries (acks) ahead [`Center::handle_entries_ref`] (`take_acks`) prefetches what
/// an entry (an ack) will touch.
const PREFETCH_AHEAD: usize = 8;

mod acks;
mod owner;
#[cfg(test)]
mod tests;

use acks::AckBook;
use owner::OwnerDetector;

/// How a center behaves; drivers differ only in these settings.
#[derive(Clone, Debug)]
pub struct CenterConfig {
    pub center: CenterId,
    pub center_count: usize,
    /// Gap buffer slots (a power of two): how far ahead of the applied watermark entries land.
    pub gap_slots: usize,
    /// A hole (or a lost tail) older than this is pulled from the durable journal.
    pub gap_timeout_us: u64,
    /// The finalizer's tally window (a power of two).
    pub finalizer_window_seqs: usize,
    /// Finality standing still this long (committed here) asks for acks again.
    pub reack_after_us: u64,
    /// An owner whose acks stand still this long is suspected (the owner failure detector).
    pub owner_silence_us: u64,
    /// Applied entries count as committed at once: the driver's durable journal is the commit
    /// (the embedded engine: one process, the journal fsynced before any center sees it).
    /// Otherwise every applied run goes out as a [`Commit`] and its acks wait for
    /// [`Center::handle_committed`].
    pub commit_on_apply: bool,
    /// Commits carry the applied entries and the ledger rows they changed (a store that writes
    /// rows per batch: the production engine).
    pub commit_rows: bool,
    /// Commits also carry the statement lines of their entries (`crate::statement`: a store
    /// that keeps every account's whole history — the production engine).
    pub commit_lines: bool,
    /// A checkpoint is due after this many applied entries (`None`: the driver's commits are
    /// complete durable states and need none).
    pub checkpoint_interval_entries: Option<u64>,
}

impl CenterConfig {
    /// The production settings of `limits` for center `center` of `center_count`.
    pub fn new(center: CenterId, center_count: usize) -> Self {
        CenterConfig {
            center,
            center_count,
            gap_slots: limits::GAP_BUFFER_SLOTS,
            gap_timeout_us: limits::GAP_TIMEOUT_US,
            finalizer_window_seqs: limits::FINALIZER_WINDOW_SEQS,
            reack_after_us: limits::REACK_AFTER_US,
            owner_silence_us: limits::OWNER_SILENCE_US,
            commit_on_apply: false,
            commit_rows: false,
            commit_lines: false,
            checkpoint_interval_entries: None,
        }
    }
}

/// An own-origin entry applied here, waiting to be announced once final.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Awaiting {
    pub seq: Seq,
    pub bmi: Bmi,
    pub outcome: Outcome,
    /// When it was submitted (µs on the engine's clock); 0 when unknown (after a restart).
    pub submitted_at_us: u64,
}

/// Where a center starts: its durable state as the driver stored it.
pub struct Restore {
    pub ledger: Ledger,
    pub host: PluginHost,
    /// The finalizer at its durable `seq_unfinal_first` (with or without pending tallies).
    pub finalizer: Finalizer,
    /// Own-origin entries applied (and durable) but not yet announced, in seq order.
    pub awaiting: Vec<Awaiting>,
    /// The journal position the reader resumes at (production: the message after the last one
    /// wholly applied); `None` for journals read by seq.
    pub journal_next: Option<u64>,
    /// The ack stream position the reader resumes at.
    pub ack_next: u64,
    /// How far the journal went when the center started: the plugins go live once applied
    /// through it (`None`: unknown — see [`Center::handle_journal_end`], or the quiet journal).
    pub catch_up_seq: Option<Seq>,
    /// This center's acks known to be in the ack stream through this seq (the driver's durable
    /// mark: production counts an ack once the broker confirmed it). `None`: no mark — the acks
    /// before the first unfinal seq are taken to be there (a stream-only path finalized nothing
    /// without them). Decides what a restart publishes again ([`Outputs::republish`]).
    pub acks_published_through: Option<Seq>,
}

impl Restore {
    /// A center that has applied nothing.
    pub fn fresh(config: &CenterConfig, host: PluginHost) -> Self {
        Restore {
            ledger: Ledger::new(),
            host,
            finalizer: Finalizer::with_window(config.center_count, config.finalizer_window_seqs, 1),
            awaiting: Vec::new(),
            journal_next: None,
            ack_next: 0,
            // Nothing to catch up with: live at once.
            catch_up_seq: Some(0),
            acks_published_through: None,
        }
    }
}

/// An inclusive range of seqs to read back from the durable journal.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Pull {
    pub from: Seq,
    pub to: Seq,
    pub why: PullReason,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum PullReason {
    /// A hole with later entries, older than the gap timeout.
    GapTimeout,
    /// Entries dropped because the gap buffer had no room for them.
    Overflow,
    /// The journal is quiet while other centers acked seqs this center lacks.
    LostTail,
}

/// Finality progress to persist with the next commit: a restart resumes from it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Seqs that became final since the last commit (ranges, ascending).
    pub final_ranges: Vec<(Seq, Seq)>,
    /// Every seq below this is final.
    pub seq_unfinal_first: Seq,
    /// Where the ack stream is read again from after a restart.
    pub ack_next: u64,
    /// Own entries below this have their notices confirmed announced.
    pub seq_notice_from: Seq,
}

impl Progress {
    /// `self` then `next` as one: ranges appended, positions the latest.
    pub fn merge(&mut self, next: Progress) {
        for (lo, hi) in next.final_ranges {
            push_range(&mut self.final_ranges, lo, hi);
        }
        self.seq_unfinal_first = next.seq_unfinal_first;
        self.ack_next = next.ack_next;
        self.seq_notice_from = next.seq_notice_from;
    }
}

/// What the driver must make durable, in one step, before the acks of `applied` go out.
#[derive(Debug, Default)]
pub struct Commit {
    /// Applied since the previous commit, in seq order (may be empty: progress only).
    pub applied: Vec<Applied>,
    /// The same entries (with [`CenterConfig::commit_rows`]).
    pub entries: Vec<Entry>,
    /// Ledger rows they changed and the funded totals (with [`CenterConfig::commit_rows`]).
    pub changed: ChangedRows,
    /// Their statement lines, in seq order (with [`CenterConfig::commit_lines`]).
    pub lines: Vec<crate::statement::AccountLine>,
    pub funded: Vec<(crate::entry::Currency, u64)>,
    /// A plugin took one of them: the plugin state must be stored with this commit (it is the
    /// host's state now, when the commit is polled); otherwise only its seq moves.
    pub plugins_changed: bool,
    /// The journal position to resume at (with positions).
    pub journal_next: Option<u64>,
    pub progress: Progress,
}

impl Commit {
    /// The seq this commit makes durable through (`None`: progress only).
    pub fn seq_last(&self) -> Option<Seq> {
        self.applied.last().map(|a| a.seq)
    }

    /// `self` then `next` as one commit (a driver behind merges what queued up).
    pub fn merge(&mut self, next: Commit) {
        self.applied.extend(next.applied);
        self.entries.extend(next.entries);
        self.lines.extend(next.lines);
        // Stable sort by key, then keep the last (newest) of each.
        let mut accounts = std::mem::take(&mut self.changed.accounts);
        accounts.extend(next.changed.accounts);
        accounts.sort_by_key(|a| a.id);
        accounts.dedup_by(|later, earlier| {
            let same = later.id == earlier.id;
            if same {
                std::mem::swap(later, earlier);
            }
            same
        });
        self.changed.accounts = accounts;
        let mut holds = std::mem::take(&mut self.changed.holds);
        holds.extend(next.changed.holds);
        holds.sort_by_key(|h| h.0);
        holds.dedup_by(|later, earlier| {
            let same = later.0 == earlier.0;
            if same {
                std::mem::swap(later, earlier);
            }
            same
        });
        self.changed.holds = holds;
        if !next.funded.is_empty() {
            self.funded = next.funded;
        }
        self.plugins_changed |= next.plugins_changed;
        self.journal_next = next.journal_next.or(self.journal_next);
        self.progress.merge(next.progress);
    }
}

/// Conditions an operator must see.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Alarm {
    /// Two reports for one seq differ: finality halted here, no side picked.
    Divergence { seq: Seq, center: CenterId, first: (Outcome, u64), reported: (Outcome, u64) },
    /// An ack message from a center that does not exist (or for seq 0): ignored.
    InvalidAck { from: CenterId, seq: Seq },
}

impl fmt::Display for Alarm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Alarm::Divergence { seq, center, first, reported } => write!(
                f,
                "DIVERGENCE at seq {seq}: {center} reported {reported:?}, first report was {first:?}; \
                 finality is halted: nothing more is finalized until an operator intervenes"
            ),
            Alarm::InvalidAck { from, seq } => write!(f, "invalid ack from {from} for seq {seq} ignored"),
        }
    }
}

/// Everything a center asks of its driver, drained by [`Center::poll_output`]. Caller-owned and
/// reused: `poll_output` appends, the driver clears what it consumed.
#[derive(Debug, Default)]
pub struct Outputs {
    /// This center's acks to publish (committed), in seq order.
    pub acks: Vec<Applied>,
    /// Publish this center's committed acks from this seq again (finality stood still; one
    /// bounded round is enough: a stall that lasts asks again).
    pub reack_from: Option<Seq>,
    /// A restart: publish every one of this center's acks `from..=through` again, before any
    /// newer ack (the driver may count them as in the stream only once they are confirmed there:
    /// a newer ack counted first would hide them from the next restart).
    pub republish: Option<(Seq, Seq)>,
    /// Read the ack stream again from this position.
    pub ack_rewind: Option<u64>,
    /// Seqs to read back from the durable journal and hand in again.
    pub pulls: Vec<Pull>,
    /// Applied runs and finality progress to make durable (in order).
    pub commits: Vec<Commit>,
    /// Own-origin entries now final: announce them (then [`Center::handle_announced`]).
    pub notices: Vec<Notice>,
    /// Effects to execute: this center is the live owner of their plugins.
    pub effects: Vec<Effect>,
    /// Commands to submit to the sequencer (owner proposals).
    pub commands: Vec<Command>,
    /// Enough was applied since the last checkpoint: take one ([`Center::checkpoint_taken`]).
    pub checkpoint_due: bool,
    pub alarms: Vec<Alarm>,
}

impl Outputs {
    /// Nothing asked (`checkpoint_due` aside: it is a flag, not a request to move anything; it
    /// stays raised until the driver takes a checkpoint).
    pub fn is_empty(&self) -> bool {
        self.acks.is_empty()
            && self.reack_from.is_none()
            && self.republish.is_none()
            && self.ack_rewind.is_none()
            && self.pulls.is_empty()
            && self.commits.is_empty()
            && self.notices.is_empty()
            && self.effects.is_empty()
            && self.commands.is_empty()
            && self.alarms.is_empty()
    }

    pub fn clear(&mut self) {
        self.acks.clear();
        self.reack_from = None;
        self.republish = None;
        self.ack_rewind = None;
        self.pulls.clear();
        self.commits.clear();
        self.notices.clear();
        self.effects.clear();
        self.commands.clear();
        self.checkpoint_due = false;
        self.alarms.clear();
    }
}

/// Counters for status and metrics (written here, never read for a decision).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CenterStats {
    /// Entries a plugin (or the host) took.
    pub plugin_entries: u64,
    pub gap_pulls: u64,
    pub gap_timeouts: u64,
    pub entries_dropped_for_room: u64,
    pub reacks: u64,
    pub ack_rewinds: u64,
    pub acks_dropped_beyond_window: u64,
    pub owner_proposals: u64,
    pub notices: u64,
    pub divergences: u64,
    /// Highest seq another center acked (as read here).
    pub seq_acked_elsewhere: Seq,
    pub checkpoints: u64,
}

/// Applied but not yet committed (explicit commits only).
#[derive(Default)]
struct Uncommitted {
    applied: Vec<Applied>,
    entries: Vec<Entry>,
    /// With [`CenterConfig::commit_lines`]: `Some`, the statement lines of the entries.
    lines: Option<Vec<crate::statement::AccountLine>>,
    plugins_changed: bool,
}

pub struct Center {
    config: CenterConfig,
    replica: Replica,
    finalizer: Finalizer,
    gap_in: GapProducer<(Entry, u64)>,
    gap_out: GapConsumer<(Entry, u64)>,
    acks: AckBook,
    owner: OwnerDetector,
    awaiting: VecDeque<Awaiting>,
    /// Notices handed out but not yet confirmed announced (their seqs, in order).
    unconfirmed: VecDeque<Seq>,
    uncommitted: Uncommitted,
    /// Commits handed out, waiting for `handle_committed`: (last seq, its acks).
    in_flight: VecDeque<(Seq, Vec<Applied>)>,
    committed_through: Seq,
    /// Acks committed, not yet polled.
    ready_acks: Vec<Applied>,
    progress: Progress,
    /// `progress` has changed since the last commit.
    progress_dirty: bool,
    /// The journal position after the last message wholly applied.
    journal_next: Option<u64>,
    /// Highest seq delivered by the journal (stored or dropped for room).
    seq_delivered_max: Seq,
    /// Highest seq another center acked, as read here: how far the journal goes (lost tails).
    seq_acked_elsewhere: Seq,
    /// Highest seq dropped for lack of room in the gap buffer.
    seq_overflow_max: Seq,
    /// The last journal delivery (lost-tail timer).
    delivered_at_us: u64,
    /// The last `handle_timeout` (timers expired before it were looked at then).
    timed_out_at_us: u64,
    /// An outstanding pull: its last seq and when it was asked.
    pull_sent: Option<(Seq, u64)>,
    pulls: Vec<Pull>,
    catch_up_seq: Option<Seq>,
    catch_up_position: Option<u64>,
    applied_since_checkpoint: u64,
    /// A plugin took an entry since the last checkpoint.
    plugins_dirty: bool,
    finals: Vec<Finality>,
    alarms: Vec<Alarm>,
    notices: Vec<Notice>,
    commands: Vec<Command>,
    reack_from: Option<Seq>,
    republish: Option<(Seq, Seq)>,
    /// This center's acks taken to be in the ack stream when it started (see
    /// [`Center::acks_published_at_start`]).
    acks_published_at_start: Seq,
    ack_rewind: Option<u64>,
    stats: CenterStats,
}

impl Center {
    /// A center resuming from `restore` at `now_us`.
    pub fn new(config: CenterConfig, restore: Restore, now_us: u64) -> Self {
        assert!(
            (1..=limits::CENTER_COUNT_MAX).contains(&config.center_count)
                && (1..=config.center_count).contains(&usize::from(config.center.0)),
            "center {} of {} is out of range",
            config.center,
            config.center_count
        );
        let Restore {
            mut ledger,
            host,
            finalizer,
            awaiting,
            journal_next,
            ack_next,
            catch_up_seq,
            acks_published_through,
        } = restore;
        ledger.track_changes(config.commit_rows);
        let seq_applied = ledger.seq_applied();
        let (gap_in, gap_out) =
            gap_buffer_with_timeout(config.gap_slots, seq_applied + 1, config.gap_timeout_us);
        let seq_unfinal_first = finalizer.seq_unfinal_first();
        let seq_notice_from = awaiting.first().map_or(seq_applied + 1, |a| a.seq);
        // Stagger the centers' checkpoints so their writes do not all hit the disk at once.
        let stagger = config
            .checkpoint_interval_entries
            .map_or(0, |i| i / config.center_count as u64 * config.center.index() as u64);
        let mut center = Center {
            acks: AckBook::new(ack_next, now_us, seq_unfinal_first),
            owner: OwnerDetector::new(config.center_count, now_us),
            replica: Replica::new(ledger, host),
            finalizer,
            gap_in,
            gap_out,
            awaiting: awaiting.into(),
            unconfirmed: VecDeque::new(),
            uncommitted: Uncommitted { lines: config.commit_lines.then(Vec::new), ..Uncommitted::default() },
            in_flight: VecDeque::new(),
            committed_through: seq_applied,
            ready_acks: Vec::new(),
            progress: Progress { final_ranges: Vec::new(), seq_unfinal_first, ack_next, seq_notice_from },
            progress_dirty: false,
            journal_next,
            seq_delivered_max: seq_applied,
            seq_acked_elsewhere: 0,
            seq_overflow_max: 0,
            delivered_at_us: now_us,
            timed_out_at_us: now_us,
            pull_sent: None,
            pulls: Vec::new(),
            catch_up_seq,
            catch_up_position: None,
            applied_since_checkpoint: stagger,
            plugins_dirty: false,
            finals: Vec::new(),
            alarms: Vec::new(),
            notices: Vec::new(),
            commands: Vec::new(),
            reack_from: None,
            republish: None,
            acks_published_at_start: 0,
            ack_rewind: None,
            stats: CenterStats::default(),
            config,
        };
        // Committed before the restart: whether the acks after the durable mark reached the
        // stream is unknown (a crash between commit and publish loses them; pushed acks may have
        // made them final without the stream), and with one center down finality needs every
        // one. The unfinal ones too, whatever the mark says (acks are idempotent). Published
        // again now rather than after finality has stood still for `reack_after_us`. (With the
        // journal as the commit there is no ack stream to miss: the acks go out as applied.)
        // Without a mark, the acks before the first unfinal seq are there (the stream alone
        // finalized them); nothing beyond what is applied can be.
        let published =
            acks_published_through.unwrap_or(seq_unfinal_first.saturating_sub(1)).min(seq_applied);
        center.acks_published_at_start = published;
        let from = published.saturating_add(1).min(seq_unfinal_first);
        if !center.config.commit_on_apply && seq_applied >= from {
            center.republish = Some((from, seq_applied));
        }
        center.maybe_go_live(now_us);
        center
    }

    // ---- inputs ----

    /// Journal entries (published, replayed or pulled; any order, duplicates welcome), each with
    /// its submit time (0 if unknown), all from the journal message at `position` if the journal
    /// has positions (`None` for pulled or replayed entries).
    pub fn handle_entries(
        &mut self,
        entries: impl IntoIterator<Item = (Entry, u64)>,
        position: Option<u64>,
        now_us: u64,
    ) {
        self.delivered_at_us = now_us;
        for (entry, submitted_at_us) in entries {
            if entry.seq == self.gap_out.seq_next() && self.gap_out.pass(entry.seq) {
                self.apply_in_hand(&entry, submitted_at_us);
            } else {
                self.buffer(entry, submitted_at_us, now_us);
            }
        }
        self.after_entries(position, now_us);
    }

    /// [`Center::handle_entries`] of entries the caller keeps (a journal batch shared by several
    /// centers): those next in order are applied from the slice, the others copied into the gap
    /// buffer. `submitted_at_us` holds one time per entry (or is empty: all unknown).
    pub fn handle_entries_ref(
        &mut self,
        entries: &[Entry],
        submitted_at_us: &[u64],
        position: Option<u64>,
        now_us: u64,
    ) {
        self.delivered_at_us = now_us;
        for (i, entry) in entries.iter().enumerate() {
            if let Some(ahead) = entries.get(i + PREFETCH_AHEAD) {
                // Hints only: the slot and the accounts an entry a few steps on will touch.
                self.gap_out.prefetch(ahead.seq);
                self.replica.ledger().prefetch(&ahead.payload);
            }
            let at = submitted_at_us.get(i).copied().unwrap_or(0);
            if entry.seq == self.gap_out.seq_next() && self.gap_out.pass(entry.seq) {
                self.apply_in_hand(entry, at);
            } else if entry.seq >= self.gap_out.seq_next() {
                self.buffer(entry.clone(), at, now_us);
            }
        }
        self.after_entries(position, now_us);
    }

    /// An entry that is not next in order (or whose slot is taken): into the gap buffer; when
    /// it is full, applies what it can first, and drops it (to pull it later) if the run cannot
    /// move.
    fn buffer(&mut self, entry: Entry, submitted_at_us: u64, now_us: u64) {
        let seq = entry.seq;
        if seq < self.gap_out.seq_next() {
            return; // applied already (a republished or replayed entry)
        }
        self.seq_delivered_max = self.seq_delivered_max.max(seq);
        let mut item = (entry, submitted_at_us);
        loop {
            match self.gap_in.insert(seq, item) {
                Insert::Stored | Insert::Duplicate | Insert::Applied | Insert::OutOfRange => return,
                Insert::Full(back) => {
                    if self.apply_ready(now_us) == 0 {
                        self.seq_overflow_max = self.seq_overflow_max.max(seq);
                        self.stats.entries_dropped_for_room += 1;
                        return;
                    }
                    item = back;
                }
            }
        }
    }

    /// After a delivery: the run that became contiguous, the journal position, pulls, live.
    fn after_entries(&mut self, position: Option<u64>, now_us: u64) {
        self.apply_ready(now_us);
        let applied = self.replica.ledger().seq_applied();
        self.seq_delivered_max = self.seq_delivered_max.max(applied);
        if let Some(p) = position {
            if self.seq_delivered_max <= applied {
                self.journal_next = Some(self.journal_next.map_or(p + 1, |n| n.max(p + 1)));
            }
        }
        self.plan_pulls(now_us);
        self.maybe_go_live(now_us);
    }

    /// One ack message of center `from` (its own acks too, read back from the stream), at
    /// `position` in the stream as this center reads it.
    pub fn handle_acks(&mut self, from: CenterId, acks: &[Applied], position: u64, now_us: u64) {
        self.take_acks(from, acks, Some(position), now_us);
    }

    /// Acks of center `from` that came *beside* the ack stream (the production engine's push
    /// path: the same message, sent the moment it was published): counted at once, but they
    /// play no part in the stream's bookkeeping — the stream still carries every ack, so the
    /// resume position, rewinds and stall re-reads stay the stream's alone. An ack beyond the
    /// tally window is simply not counted here (the stream brings it again).
    pub fn handle_acks_pushed(&mut self, from: CenterId, acks: &[Applied], now_us: u64) {
        self.take_acks(from, acks, None, now_us);
    }

    fn take_acks(&mut self, from: CenterId, acks: &[Applied], position: Option<u64>, now_us: u64) {
        let Some(seq_max) = acks.last().map(|a| a.seq) else { return };
        if from.0 == 0 || usize::from(from.0) > self.config.center_count {
            self.alarms.push(Alarm::InvalidAck { from, seq: seq_max });
            return;
        }
        if let Some(position) = position {
            self.acks.read(position, seq_max);
        }
        self.owner.acked(from, seq_max, now_us);
        if from != self.config.center {
            self.seq_acked_elsewhere = self.seq_acked_elsewhere.max(seq_max);
            self.stats.seq_acked_elsewhere = self.seq_acked_elsewhere;
        }
        for (i, ack) in acks.iter().enumerate() {
            if let Some(ahead) = acks.get(i + PREFETCH_AHEAD) {
                self.finalizer.prefetch(ahead.seq);
            }
            match self.finalizer.handle_ack(from, *ack, &mut self.finals) {
                AckResult::Deferred => {
                    // A center acks in seq order: the rest of the message is beyond too.
                    if let Some(position) = position {
                        self.acks.dropped(position, ack.seq);
                        self.stats.acks_dropped_beyond_window += 1;
                    }
                    break;
                }
                AckResult::Invalid => {
                    self.alarms.push(Alarm::InvalidAck { from, seq: ack.seq });
                    break;
                }
                AckResult::Counted | AckResult::Duplicate | AckResult::Late => {}
            }
        }
        self.settle(now_us);
        if let Some(to) =
            self.acks.rewind_due(self.finalizer.seq_unfinal_first(), self.config.finalizer_window_seqs)
        {
            self.rewind_acks(to);
        }
    }

    /// The driver made everything applied through `seq` durable: its acks may go out.
    pub fn handle_committed(&mut self, seq: Seq) {
        while self.in_flight.front().is_some_and(|(last, _)| *last <= seq) {
            if let Some((last, acks)) = self.in_flight.pop_front() {
                self.committed_through = self.committed_through.max(last);
                self.ready_acks.extend(acks);
            }
        }
        self.announce();
    }

    /// Notices handed out through `seq` reached the participants' channel (the broker confirmed
    /// them): a restart need not repeat them.
    pub fn handle_announced(&mut self, seq: Seq) {
        let before = self.seq_notice_from();
        while self.unconfirmed.front().is_some_and(|s| *s <= seq) {
            self.unconfirmed.pop_front();
        }
        if self.seq_notice_from() != before {
            self.progress_dirty = true;
        }
    }

    /// Where the journal ended when the reader started (a position): the plugins go live once
    /// the reader is past it.
    pub fn handle_journal_end(&mut self, position_end: u64, now_us: u64) {
        self.catch_up_position = Some(position_end);
        self.maybe_go_live(now_us);
    }

    /// Time passed: gap and tail timers, finality standing still, the owner failure detector.
    pub fn handle_timeout(&mut self, now_us: u64) {
        self.timed_out_at_us = now_us;
        self.plan_pulls(now_us);
        self.maybe_go_live(now_us);
        let unfinal = self.finalizer.seq_unfinal_first();
        if self.acks.stalled(unfinal, now_us, self.config.reack_after_us)
            && !self.finalizer.is_halted()
            && self.committed_through >= unfinal
        {
            self.reack_from = Some(unfinal);
            self.stats.reacks += 1;
            if let Some(to) = self.acks.stall_rewind() {
                self.rewind_acks(to);
            }
        }
        if let Some(command) = self.owner.check(
            self.config.center,
            self.replica.host(),
            self.committed_through,
            now_us,
            self.config.owner_silence_us,
        ) {
            self.stats.owner_proposals += 1;
            self.commands.push(command);
        }
    }

    /// When `handle_timeout` should be called next (at the latest). A timer that expired and was
    /// looked at without its rule being met stays expired; it is looked at again no sooner than
    /// [`limits::TIMER_RESOLUTION_US`] after the last look, so a driver that sleeps until this
    /// never spins.
    pub fn poll_timeout(&self) -> u64 {
        let c = &self.config;
        let mut next = self.delivered_at_us.saturating_add(c.gap_timeout_us);
        next = next.min(self.acks.stalled_since().saturating_add(c.reack_after_us));
        next = next.min(self.owner.next_check_us(c.owner_silence_us));
        next.max(self.timed_out_at_us.saturating_add(limits::TIMER_RESOLUTION_US))
    }

    /// Moves everything the center asks of its driver into `out` (appending).
    pub fn poll_output(&mut self, out: &mut Outputs) {
        self.announce();
        self.collect_commit(out);
        out.acks.append(&mut self.ready_acks);
        out.reack_from = out.reack_from.or(self.reack_from.take());
        out.republish = out.republish.or(self.republish.take());
        if let Some(to) = self.ack_rewind.take() {
            out.ack_rewind = Some(out.ack_rewind.map_or(to, |o| o.min(to)));
        }
        out.pulls.append(&mut self.pulls);
        out.notices.append(&mut self.notices);
        out.commands.append(&mut self.commands);
        out.alarms.append(&mut self.alarms);
        self.replica.host_mut().take_effects(&mut out.effects);
        if let Some(interval) = self.config.checkpoint_interval_entries {
            out.checkpoint_due |= self.applied_since_checkpoint >= interval;
        }
    }

    /// The driver took a checkpoint of the state as it is now.
    pub fn checkpoint_taken(&mut self) {
        self.applied_since_checkpoint = 0;
        self.plugins_dirty = false;
        self.stats.checkpoints += 1;
    }

    /// A plugin took an entry since the last checkpoint (its state must be written again).
    pub fn plugins_changed_since_checkpoint(&self) -> bool {
        self.plugins_dirty
    }

    // ---- state, for drivers, status and audits ----

    /// This center's acks known to be in the ack stream when it started: the restored mark, or
    /// (without one) those before the first unfinal seq, never beyond the last applied. A
    /// driver that counts its confirmed acks starts its durable mark here; what the restart
    /// publishes again ([`Outputs::republish`]) starts at most one after it.
    pub fn acks_published_at_start(&self) -> Seq {
        self.acks_published_at_start
    }

    pub fn id(&self) -> CenterId {
        self.config.center
    }
    pub fn config(&self) -> &CenterConfig {
        &self.config
    }
    pub fn ledger(&self) -> &Ledger {
        self.replica.ledger()
    }
    pub fn host(&self) -> &PluginHost {
        self.replica.host()
    }
    pub fn finalizer(&self) -> &Finalizer {
        &self.finalizer
    }
    pub fn seq_applied(&self) -> Seq {
        self.replica.ledger().seq_applied()
    }
    pub fn seq_committed(&self) -> Seq {
        self.committed_through
    }
    /// Every seq below this is final here.
    pub fn seq_unfinal_first(&self) -> Seq {
        self.finalizer.seq_unfinal_first()
    }
    /// Own-origin entries applied and not yet announced, in seq order (checkpoints hold them).
    pub fn awaiting(&self) -> impl Iterator<Item = &Awaiting> + '_ {
        self.awaiting.iter()
    }
    /// The current finality position (what the next commit would persist, without its ranges).
    pub fn progress(&self) -> Progress {
        Progress {
            final_ranges: Vec::new(),
            seq_unfinal_first: self.finalizer.seq_unfinal_first(),
            ack_next: self.acks.resume_position(),
            seq_notice_from: self.seq_notice_from(),
        }
    }
    pub fn journal_next(&self) -> Option<u64> {
        self.journal_next
    }
    pub fn stats(&self) -> &CenterStats {
        &self.stats
    }
    /// The plugins are live: the owner executes their effects.
    pub fn is_live(&self) -> bool {
        self.replica.host().is_live()
    }
    /// A producer handle of the gap buffer, for drivers that insert from other threads.
    pub fn seq_next(&self) -> Seq {
        self.gap_out.seq_next()
    }

    // ---- the rules ----

    /// Applies the contiguous run; returns how many entries were applied.
    fn apply_ready(&mut self, now_us: u64) -> usize {
        let me = self.config.center;
        let keep = self.config.commit_rows;
        let (replica, awaiting, uncommitted) = (&mut self.replica, &mut self.awaiting, &mut self.uncommitted);
        let mut plugin_entries = 0;
        let n = self.gap_out.drain(usize::MAX, now_us, |_, (entry, submitted_at_us)| {
            let kept = apply_one(me, replica, awaiting, uncommitted, &entry, submitted_at_us);
            plugin_entries += u64::from(kept);
            if keep {
                uncommitted.entries.push(entry);
            }
        });
        self.applied(n as u64, plugin_entries);
        n
    }

    /// Applies `entry`, the next seq, held in hand (it never went through the gap buffer).
    fn apply_in_hand(&mut self, entry: &Entry, submitted_at_us: u64) {
        let me = self.config.center;
        let plugin = apply_one(
            me,
            &mut self.replica,
            &mut self.awaiting,
            &mut self.uncommitted,
            entry,
            submitted_at_us,
        );
        if self.config.commit_rows {
            self.uncommitted.entries.push(entry.clone());
        }
        self.applied(1, u64::from(plugin));
    }

    /// Bookkeeping after `n` entries were applied (`plugin_entries` of them taken by a plugin).
    fn applied(&mut self, n: u64, plugin_entries: u64) {
        if n == 0 {
            return;
        }
        self.applied_since_checkpoint += n;
        self.stats.plugin_entries += plugin_entries;
        self.plugins_dirty |= self.uncommitted.plugins_changed;
        if self.config.commit_on_apply {
            self.committed_through = self.replica.ledger().seq_applied();
            // One entry at a time on the hot path (`apply_in_hand`): a push, not a `memmove`
            // call per entry (5 % of the embedded demo's CPU in a profile).
            if let [one] = self.uncommitted.applied[..] {
                self.ready_acks.push(one);
                self.uncommitted.applied.clear();
            } else {
                self.ready_acks.append(&mut self.uncommitted.applied);
            }
            self.uncommitted.plugins_changed = false;
        }
    }

    /// Moves the uncommitted run and the finality progress into a commit (explicit commits).
    fn collect_commit(&mut self, out: &mut Outputs) {
        if self.config.commit_on_apply {
            return;
        }
        let has_entries = !self.uncommitted.applied.is_empty();
        if !has_entries && !self.progress_dirty {
            return;
        }
        let u = std::mem::take(&mut self.uncommitted);
        if self.config.commit_lines {
            self.uncommitted.lines = Some(Vec::new());
        }
        let mut commit = Commit {
            progress: self.take_progress(),
            journal_next: self.journal_next,
            plugins_changed: u.plugins_changed,
            entries: u.entries,
            lines: u.lines.unwrap_or_default(),
            ..Commit::default()
        };
        if self.config.commit_rows && has_entries {
            let funded = self.replica.ledger_mut().take_changed(&mut commit.changed);
            commit.funded = funded.to_vec();
        }
        if let Some(last) = u.applied.last().map(|a| a.seq) {
            self.in_flight.push_back((last, u.applied.clone()));
        }
        commit.applied = u.applied;
        out.commits.push(commit);
    }

    fn take_progress(&mut self) -> Progress {
        self.progress_dirty = false;
        self.progress.seq_notice_from = self.seq_notice_from();
        self.progress.ack_next = self.acks.resume_position();
        Progress { final_ranges: std::mem::take(&mut self.progress.final_ranges), ..self.progress.clone() }
    }

    /// Own entries below this have their notices confirmed (or are not owed any).
    fn seq_notice_from(&self) -> Seq {
        self.unconfirmed
            .front()
            .or(self.awaiting.front().map(|a| &a.seq))
            .copied()
            .unwrap_or(self.committed_through + 1)
    }

    /// Turns finality events into progress, alarms and notices.
    fn settle(&mut self, now_us: u64) {
        for event in self.finals.drain(..) {
            match event {
                Finality::Final { seq, .. } => {
                    push_range(&mut self.progress.final_ranges, seq, seq);
                    self.progress_dirty = true;
                }
                Finality::Divergence { seq, center, first, reported } => {
                    self.stats.divergences += 1;
                    self.alarms.push(Alarm::Divergence { seq, center, first, reported });
                }
            }
        }
        let unfinal = self.finalizer.seq_unfinal_first();
        if unfinal != self.progress.seq_unfinal_first {
            self.progress.seq_unfinal_first = unfinal;
            self.progress_dirty = true;
        }
        self.acks.finality_at(unfinal, now_us);
        self.announce();
    }

    /// Own-origin entries that are applied, committed here and final: announce each once.
    fn announce(&mut self) {
        if self.finalizer.is_halted() {
            return;
        }
        let through = self.finalizer.seq_unfinal_first().min(self.committed_through + 1);
        while self.awaiting.front().is_some_and(|w| w.seq < through) {
            let Some(w) = self.awaiting.pop_front() else { break };
            if let SeqStatus::Final(o) = self.finalizer.status(w.seq) {
                assert_eq!(
                    o, w.outcome,
                    "{}: own outcome at seq {} differs from the final one",
                    self.config.center, w.seq
                );
            }
            self.notices.push(Notice {
                center: self.config.center,
                seq: w.seq,
                bmi: w.bmi,
                outcome: w.outcome,
                submitted_at_us: w.submitted_at_us,
            });
            self.unconfirmed.push_back(w.seq);
            self.stats.notices += 1;
        }
    }

    fn rewind_acks(&mut self, to: u64) {
        self.acks.rewind(to);
        self.stats.ack_rewinds += 1;
        self.ack_rewind = Some(self.ack_rewind.map_or(to, |o| o.min(to)));
    }

    /// Decides what to pull from the durable journal (see the module docs).
    fn plan_pulls(&mut self, now_us: u64) {
        let seq_next = self.gap_out.seq_next();
        let reach = seq_next + self.config.gap_slots as u64 - 1;
        if let Some((to, at)) = self.pull_sent {
            if seq_next > to || now_us >= at.saturating_add(self.config.gap_timeout_us) {
                self.pull_sent = None;
            }
        }
        if let Some(gap) = self.gap_out.poll_gap(now_us) {
            self.stats.gap_timeouts += 1;
            let to = gap.seq_seen_max.min(reach);
            self.pull(gap.seq_missing_first, to, PullReason::GapTimeout, now_us);
            return;
        }
        if self.pull_sent.is_some() {
            return;
        }
        if self.seq_overflow_max >= seq_next {
            self.pull(seq_next, self.seq_overflow_max.min(reach), PullReason::Overflow, now_us);
            return;
        }
        let quiet = now_us >= self.delivered_at_us.saturating_add(self.config.gap_timeout_us);
        let known = self.seq_acked_elsewhere;
        if quiet && known >= seq_next {
            self.delivered_at_us = now_us;
            self.pull(seq_next, known.min(reach), PullReason::LostTail, now_us);
        }
    }

    fn pull(&mut self, from: Seq, to: Seq, why: PullReason, now_us: u64) {
        self.stats.gap_pulls += 1;
        self.pull_sent = Some((to, now_us));
        self.pulls.push(Pull { from, to, why });
    }

    /// Live (the owner executes) once caught up with the journal as it stood at start (a seq or
    /// a position), or when it is quiet and nothing is known to be missing.
    fn maybe_go_live(&mut self, now_us: u64) {
        if self.replica.host().is_live() {
            return;
        }
        let applied = self.replica.ledger().seq_applied();
        let by_seq = self.catch_up_seq.is_some_and(|s| applied >= s);
        let by_position = self.catch_up_position.is_some_and(|p| self.journal_next.is_some_and(|n| n >= p));
        let quiet = now_us >= self.delivered_at_us.saturating_add(self.config.gap_timeout_us)
            && self.seq_acked_elsewhere < self.gap_out.seq_next()
            && self.seq_delivered_max <= applied;
        if by_seq || by_position || quiet {
            self.replica.host_mut().set_live();
        }
    }
}

/// Applies one entry to the replica, notes it for the commit and, if it is this center's own,
/// for its notice; true if a plugin took it.
fn apply_one(
    me: CenterId,
    replica: &mut Replica,
    awaiting: &mut VecDeque<Awaiting>,
    uncommitted: &mut Uncommitted,
    entry: &Entry,
    submitted_at_us: u64,
) -> bool {
    let (applied, plugin) = replica.apply(entry);
    uncommitted.plugins_changed |= plugin;
    if let Some(lines) = uncommitted.lines.as_mut() {
        crate::statement::lines_of(entry, &applied, plugin, replica, lines);
    }
    if entry.origin == me && !entry.bmi.is_none() {
        awaiting.push_back(Awaiting {
            seq: applied.seq,
            bmi: entry.bmi,
            outcome: applied.outcome,
            submitted_at_us,
        });
    }
    uncommitted.applied.push(applied);
    plugin
}

/// Appends `lo..=hi`, extending the last range when it continues it.
fn push_range(ranges: &mut Vec<(Seq, Seq)>, lo: Seq, hi: Seq) {
    match ranges.last_mut() {
        Some(last) if last.1 + 1 == lo => last.1 = hi,
        _ => ranges.push((lo, hi)),
    }
}
