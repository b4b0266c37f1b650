//! `rtgs verify`: an independent, read-only audit of a data directory.
//!
//! **Read-only.** Every file is opened for reading only and not one byte changes, whatever is
//! found: the journal is checked as a start would check it (`journal::inspect`: every frame's
//! length and checksum, seq continuity, the durable marks, the mirror's copy if given) but a torn
//! tail is only reported, a frame the mirror could repair only counted, corruption only named.
//! (A test compares checksums of the whole directory before and after, on a corrupt one too.)
//!
//! Then the journal is replayed (up to its last valid seq, each segment from a copy that holds
//! all of it) into a fresh ledger and, at each center's checkpointed watermark, that center's
//! ledger and state hash are compared with the replay. A center that applied something twice,
//! skipped something, or whose checkpoint does not match the journal fails the audit; so does
//! money not being conserved, a damaged checkpoint, or a journal the node would refuse.
//!
//! A data directory whose checkpoints hold plugin state (a `demo --collection` run) is replayed
//! through a plugin host too — its step digests are part of the state hash — and each center's
//! whole plugin state is compared with the replay's at its watermark.

use clap::Args;
use rtgs_core::entry::{CenterId, Seq};
use rtgs_core::ledger::Ledger;
use rtgs_core::plugin_host::PluginHost;
use rtgs_core::replica::Replica;
use rtgs_embedded::checkpoint::{self, CenterCheckpoint};
use rtgs_embedded::journal::{self, Inspection, JournalReader};
use serde::Serialize;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct VerifyArgs {
    /// The data directory of an embedded cluster (stopped).
    #[arg(long)]
    pub data_dir: PathBuf,
    /// The journal's mirror directory, if the cluster kept one (`--journal-mirror`).
    #[arg(long)]
    pub journal_mirror: Option<PathBuf>,
    /// Centers whose checkpoints to check.
    #[arg(long, default_value_t = 3)]
    pub centers: usize,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct CenterCheck {
    id: String,
    checkpoint_seq: Option<Seq>,
    checkpoint_state_hash: Option<String>,
    matches_journal: bool,
    /// Why the checkpoint could not be read (damaged: a start refuses it).
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(Serialize, Default)]
struct Verdict {
    journal_seq_last: Seq,
    /// Covered by a durable mark: every seq up to here may have been published.
    journal_seq_durable: Seq,
    /// The last segment and where in it that mark ends: every byte before is durable.
    journal_last_segment: Option<String>,
    journal_durable_bytes: u64,
    /// Bytes a start would cut past the last valid frame (a torn tail, with the writer's zeros
    /// ahead after it); nothing is cut here.
    journal_torn_tail_bytes: u64,
    /// Frames a start would copy from one copy of the journal to the other (with a mirror).
    journal_repairable_frames: u64,
    /// Why a start would refuse this journal (corruption, named), if it would.
    #[serde(skip_serializing_if = "Option::is_none")]
    journal_error: Option<String>,
    replayed_seq_last: Seq,
    replay_state_hash: String,
    conserved: bool,
    centers: Vec<CenterCheck>,
    ok: bool,
}

pub fn run(args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let journal_dir = args.data_dir.join("journal");
    if !journal_dir.is_dir() {
        anyhow::bail!("{} has no journal/ directory", args.data_dir.display());
    }
    let mut verdict = Verdict::default();
    let checkpoints = read_checkpoints(&args, &mut verdict);
    match journal::inspect(&journal_dir, args.journal_mirror.as_deref()) {
        Ok(found) => replay(&found, &checkpoints, &mut verdict)?,
        Err(e) => verdict.journal_error = Some(e.to_string()),
    }
    verdict.ok = verdict.journal_error.is_none()
        && verdict.conserved
        && verdict.replayed_seq_last == verdict.journal_seq_last
        && verdict.centers.iter().all(|c| c.matches_journal && c.error.is_none());
    if args.json {
        println!("{}", serde_json::to_string_pretty(&verdict)?);
    } else {
        print_human(&verdict);
    }
    Ok(if verdict.ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Every center's checkpoint (read-only), each with the whole-state hash of its plugin state.
fn read_checkpoints(
    args: &VerifyArgs,
    verdict: &mut Verdict,
) -> Vec<Option<(CenterCheckpoint, Option<u64>)>> {
    let mut out = Vec::new();
    for i in 0..args.centers {
        let id = CenterId::from_index(i);
        let read = checkpoint::read(&checkpoint::path_for(&args.data_dir, id))
            .map_err(|e| e.to_string())
            .and_then(|c| c.map(|c| plugin_hash(id, &c).map(|h| (c, h))).transpose());
        let (check, ckpt) = match read {
            Ok(c) => (
                CenterCheck {
                    id: id.to_string(),
                    checkpoint_seq: c.as_ref().map(|(c, _)| c.ledger.seq_applied()),
                    checkpoint_state_hash: c.as_ref().map(|(c, _)| format!("{:016x}", c.ledger.state_hash())),
                    matches_journal: c.as_ref().is_none_or(|(c, _)| c.ledger.seq_applied() == 0),
                    error: None,
                },
                c,
            ),
            Err(e) => (
                CenterCheck {
                    id: id.to_string(),
                    checkpoint_seq: None,
                    checkpoint_state_hash: None,
                    matches_journal: false,
                    error: Some(e),
                },
                None,
            ),
        };
        verdict.centers.push(check);
        out.push(ckpt);
    }
    out
}

/// The whole-state hash of a checkpoint's plugin state, checked against the checkpoint.
fn plugin_hash(id: CenterId, c: &CenterCheckpoint) -> Result<Option<u64>, String> {
    let Some((at, bytes)) = c.plugins.as_ref() else { return Ok(None) };
    let mut h = plugin_set(bytes).map_err(|e| format!("{id}: {e}"))?.host(id);
    h.restore(bytes).map_err(|e| format!("{id}: plugin state in its checkpoint: {e}"))?;
    if h.state_hash() != at.state_hash {
        return Err(format!("{id}: its plugin state file does not match its checkpoint"));
    }
    Ok(Some(h.state_hash()))
}

/// Replays the journal (read-only) and compares every checkpoint at its watermark.
fn replay(
    found: &Inspection,
    checkpoints: &[Option<(CenterCheckpoint, Option<u64>)>],
    verdict: &mut Verdict,
) -> anyhow::Result<()> {
    let tail = &found.tail;
    verdict.journal_seq_last = tail.seq_last;
    verdict.journal_seq_durable = tail.seq_durable;
    verdict.journal_durable_bytes = tail.durable_bytes;
    verdict.journal_last_segment =
        found.replay.as_ref().and_then(|r| r.last()).map(|(_, p)| p.display().to_string());
    verdict.journal_torn_tail_bytes = tail.truncated_bytes;
    verdict.journal_repairable_frames = tail.repaired_frames;
    let Some(segments) = found.replay.clone() else {
        verdict.journal_error = Some(
            "a segment is damaged in both copies at different frames: a start repairs it (each frame from the \
             copy that holds it); a read-only audit cannot replay it"
                .into(),
        );
        return Ok(());
    };
    // The replay hosts the set of plugins the checkpoints hold, through the same apply path as
    // every center (ledger and plugins: one replica).
    let with_plugins = checkpoints.iter().flatten().find_map(|(c, _)| c.plugins.as_ref());
    let set = match with_plugins {
        Some((_, bytes)) => plugin_set(bytes).map_err(|e| anyhow::anyhow!(e))?,
        None => rtgs_plugins::PluginsConfig::default(),
    };
    let mut replica = Replica::new(Ledger::new(), set.host(CenterId(1)));
    let mut reader = JournalReader::open_segments(segments, 1, tail.seq_last)?;
    let mut entries = Vec::new();
    while reader.next_batch(&mut entries)? {
        for e in entries.drain(..) {
            replica.apply(&e);
            for (check, c) in verdict.centers.iter_mut().zip(checkpoints) {
                if let Some((c, plugins)) = c {
                    if c.ledger.seq_applied() == e.seq {
                        check.matches_journal = c.ledger == *replica.ledger()
                            && plugins.is_none_or(|h| h == replica.host().state_hash());
                    }
                }
            }
        }
    }
    let ledger = replica.ledger();
    verdict.replayed_seq_last = ledger.seq_applied();
    verdict.replay_state_hash = format!("{:016x}", ledger.state_hash());
    verdict.conserved = ledger.check_conservation().is_ok();
    Ok(())
}

fn print_human(v: &Verdict) {
    match &v.journal_error {
        Some(e) => println!("journal: REFUSED — {e}"),
        None => println!(
            "journal: {} entries (durable mark at seq {}), replay state hash {}, conserved {}{}{}",
            v.journal_seq_last,
            v.journal_seq_durable,
            v.replay_state_hash,
            v.conserved,
            if v.journal_torn_tail_bytes > 0 {
                format!(
                    ", torn tail of {} bytes with the zeros after it (a start cuts it)",
                    v.journal_torn_tail_bytes
                )
            } else {
                String::new()
            },
            if v.journal_repairable_frames > 0 {
                format!(", {} frames a start repairs from the other copy", v.journal_repairable_frames)
            } else {
                String::new()
            }
        ),
    }
    for c in &v.centers {
        match &c.error {
            Some(e) => println!("  {}: checkpoint DAMAGED — {e}", c.id),
            None => println!(
                "  {}: checkpoint at seq {} ({}) {}",
                c.id,
                c.checkpoint_seq.map_or("-".into(), |s| s.to_string()),
                c.checkpoint_state_hash.as_deref().unwrap_or("none"),
                if c.matches_journal { "matches the journal" } else { "DOES NOT MATCH the journal" }
            ),
        }
    }
    println!("{}", if v.ok { "OK" } else { "FAILED" });
}

/// The set of plugins a checkpoint's plugin state holds (named in `rtgs-plugins`).
fn plugin_set(bytes: &[u8]) -> Result<rtgs_plugins::PluginsConfig, String> {
    PluginHost::kinds_in(bytes)
        .and_then(|kinds| rtgs_plugins::PluginsConfig::of_kinds(&kinds))
        .ok_or_else(|| "its checkpoint holds an unknown set of plugins".to_string())
}
