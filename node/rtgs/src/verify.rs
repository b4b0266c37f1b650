//! `rtgs verify`: an independent audit of a data directory.
//!
//! Replays the whole journal (every frame's length, checksum and seq continuity is checked) into
//! a fresh ledger and, at each center's checkpointed watermark, compares that center's ledger and
//! state hash with the replay. A center that applied something twice, skipped something, or whose
//! checkpoint does not match the journal fails the audit; so does money not being conserved.
//!
//! A data directory whose checkpoints hold plugin state (a `demo --collection` run) is replayed
//! through a plugin host too — its step digests are part of the state hash — and each center's
//! whole plugin state is compared with the replay's at its watermark.

use anyhow::Context;
use clap::Args;
use rtgs_core::entry::{CenterId, Seq};
use rtgs_core::ledger::Ledger;
use rtgs_core::plugin_host::PluginHost;
use rtgs_core::replica::Replica;
use rtgs_embedded::checkpoint;
use rtgs_embedded::journal::{Journal, JournalReader};
use serde::Serialize;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct VerifyArgs {
    /// The data directory of an embedded cluster (stopped).
    #[arg(long)]
    pub data_dir: PathBuf,
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
}

#[derive(Serialize)]
struct Verdict {
    journal_seq_last: Seq,
    journal_truncated_bytes: u64,
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
    // Opening cuts a torn tail exactly as a restart would.
    let (_, tail) = Journal::open(&journal_dir, rtgs_embedded::limits::SEGMENT_BYTES_MAX)
        .with_context(|| format!("opening the journal in {}", journal_dir.display()))?;
    let mut checkpoints = Vec::new();
    for i in 0..args.centers {
        let id = CenterId::from_index(i);
        checkpoints.push((id, checkpoint::read(&checkpoint::path_for(&args.data_dir, id))?));
    }
    let mut checks: Vec<CenterCheck> = checkpoints
        .iter()
        .map(|(id, c)| CenterCheck {
            id: id.to_string(),
            checkpoint_seq: c.as_ref().map(|c| c.ledger.seq_applied()),
            checkpoint_state_hash: c.as_ref().map(|c| format!("{:016x}", c.ledger.state_hash())),
            matches_journal: c.as_ref().is_none_or(|c| c.ledger.seq_applied() == 0),
        })
        .collect();
    // The plugin state each checkpoint holds, as a whole-state hash; the replay hosts the set
    // of plugins the checkpoints hold.
    let mut plugin_hashes = Vec::new();
    let mut set = rtgs_plugins::PluginsConfig::default();
    for (id, c) in &checkpoints {
        plugin_hashes.push(match c.as_ref().and_then(|c| c.plugins.as_ref()) {
            Some((at, bytes)) => {
                set = PluginHost::kinds_in(bytes)
                    .and_then(|kinds| rtgs_plugins::PluginsConfig::of_kinds(&kinds))
                    .with_context(|| format!("{id}: its checkpoint holds an unknown set of plugins"))?;
                let mut h = set.host(*id);
                h.restore(bytes).with_context(|| format!("{id}: plugin state in its checkpoint"))?;
                if h.state_hash() != at.state_hash {
                    anyhow::bail!("{id}: its plugin state file does not match its checkpoint");
                }
                Some(h.state_hash())
            }
            None => None,
        });
    }
    // The same apply path as every center: ledger and plugins, one replica.
    let mut replica = Replica::new(Ledger::new(), set.host(CenterId(1)));
    let mut reader = JournalReader::open(&journal_dir, 1)?;
    let mut entries = Vec::new();
    while reader.next_batch(&mut entries)? {
        for e in entries.drain(..) {
            replica.apply(&e);
            for ((check, (_, c)), plugins) in checks.iter_mut().zip(&checkpoints).zip(&plugin_hashes) {
                if let Some(c) = c {
                    if c.ledger.seq_applied() == e.seq {
                        check.matches_journal = c.ledger == *replica.ledger()
                            && plugins.is_none_or(|h| h == replica.host().state_hash());
                    }
                }
            }
        }
    }
    let ledger = replica.ledger();
    let conserved = ledger.check_conservation().is_ok();
    let ok = conserved && ledger.seq_applied() == tail.seq_last && checks.iter().all(|c| c.matches_journal);
    let verdict = Verdict {
        journal_seq_last: tail.seq_last,
        journal_truncated_bytes: tail.truncated_bytes,
        replay_state_hash: format!("{:016x}", ledger.state_hash()),
        conserved,
        centers: checks,
        ok,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&verdict)?);
    } else {
        println!(
            "journal: {} entries, replay state hash {}, conserved {}{}",
            verdict.journal_seq_last,
            verdict.replay_state_hash,
            verdict.conserved,
            if verdict.journal_truncated_bytes > 0 {
                format!(", torn tail of {} bytes cut", verdict.journal_truncated_bytes)
            } else {
                String::new()
            }
        );
        for c in &verdict.centers {
            println!(
                "  {}: checkpoint at seq {} ({}) {}",
                c.id,
                c.checkpoint_seq.map_or("-".into(), |s| s.to_string()),
                c.checkpoint_state_hash.as_deref().unwrap_or("none"),
                if c.matches_journal { "matches the journal" } else { "DOES NOT MATCH the journal" }
            );
        }
        println!("{}", if verdict.ok { "OK" } else { "FAILED" });
    }
    Ok(if verdict.ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
