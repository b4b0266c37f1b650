//! `rtgs reconcile`: compare the center databases of the production engine (seed 003 §10), on a
//! stopped or a live cluster. Each center is read as one state of its database (one
//! `REPEATABLE READ` transaction; up to `--attempts` rounds to catch every center at one seq), and
//! the centers are compared **at the common seq** — the highest seq every center has committed:
//! the state hash each recorded there (on a mismatch, the first seq whose outcome or hash
//! differs), the balances of centers read at the same seq, and each center's money total
//! (balances and plugin holds together). A center behind the others is **lag**, reported per
//! center (`seq_committed`, `lag_entries` behind the most advanced, `entries_past_common`), never a
//! difference.
//!
//! Exit status: 0 when no difference was found (whatever the lag), 1 on any difference, 2 when a
//! database cannot be read. `--json` for machines.

use anyhow::Context;
use clap::Args;
use rtgs_pg::reconcile::{
    balances_compared, compare, first_divergent_seq, lags, read_consistent, Difference,
};
use serde::Serialize;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args)]
pub struct ReconcileArgs {
    /// Number of centers (databases PREFIX1..PREFIXn).
    #[arg(long, default_value_t = 3)]
    pub centers: usize,
    /// Database name prefix.
    #[arg(long, default_value = "rtgs_dc")]
    pub db_prefix: String,
    #[command(flatten)]
    pub pg: crate::pg_args::PgArgs,
    /// Rounds of reading, 100 ms apart, until every center is read at one seq (so that all
    /// balances compare); the last round is compared whatever its seqs.
    #[arg(long, default_value_t = 10)]
    pub attempts: u32,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct CenterJson {
    center: String,
    /// The seq this center's database holds (`seq_committed` too, the name `rtgs status` uses).
    seq_applied: u64,
    seq_committed: u64,
    /// Entries behind the most advanced center (lag, not a difference).
    lag_entries: u64,
    /// Entries beyond the common seq.
    entries_past_common: u64,
    /// The state hash at this center's own seq.
    state_hash: String,
    /// The state hash it recorded at the common seq (what the centers are compared by).
    state_hash_at_common: Option<String>,
    /// Its balances were compared with another center read at the same seq.
    balances_compared: bool,
    seq_unfinal_first: u64,
    accounts: usize,
    balance_total_minor: String,
    held_total_minor: String,
    funded_total_minor: String,
}

#[derive(Serialize)]
struct Report {
    /// The highest seq every center has committed: where the centers are compared.
    common_seq: u64,
    /// The most advanced center's seq.
    highest_seq: u64,
    /// Reading rounds used (see --attempts).
    attempts: u32,
    centers: Vec<CenterJson>,
    first_divergent_seq: Option<u64>,
    differences: Vec<String>,
    ok: bool,
}

pub fn run(args: ReconcileArgs) -> anyhow::Result<ExitCode> {
    if args.centers < 2 {
        anyhow::bail!("--centers must be at least 2 to reconcile anything");
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let report = rt.block_on(reconcile(&args))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("common seq {} (the highest {})", report.common_seq, report.highest_seq);
        for c in &report.centers {
            println!(
                "{}: seq_committed {} lag {} state_hash {} accounts {} balances {} held {} funded {}{}",
                c.center,
                c.seq_committed,
                c.lag_entries,
                c.state_hash,
                c.accounts,
                c.balance_total_minor,
                c.held_total_minor,
                c.funded_total_minor,
                if c.balances_compared { "" } else { " (balances not compared: no other center at its seq)" }
            );
        }
        if let Some(seq) = report.first_divergent_seq {
            println!("first divergent seq: {seq}");
        }
        for d in &report.differences {
            println!("DIFFERENCE: {d}");
        }
        println!("{}", if report.ok { "OK: the centers reconcile" } else { "FAILED: the centers differ" });
    }
    Ok(if report.ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

async fn reconcile(args: &ReconcileArgs) -> anyhow::Result<Report> {
    let mut centers = Vec::new();
    for i in 1..=args.centers {
        let db = format!("{}{i}", args.db_prefix);
        centers.push((format!("DC{i}"), args.pg.server().pool(&db, 1)?));
    }
    let reading =
        read_consistent(&centers, args.attempts, Duration::from_millis(100)).await.with_context(|| {
            format!("reading {}1..{} on {}", args.db_prefix, args.centers, args.pg.server().address())
        })?;
    let (snaps, common_seq) = (&reading.snapshots, reading.common_seq);
    let hashes: Vec<(u64, Option<u64>)> = reading.hash_at_common.iter().map(|h| (common_seq, *h)).collect();
    let differences: Vec<Difference> = compare(snaps, &hashes);
    let pools: Vec<_> = centers.iter().map(|(_, p)| p).collect();
    let mut first_divergent = None;
    for pool in pools.iter().skip(1) {
        if let Some(seq) = first_divergent_seq(pools[0], pool, common_seq).await? {
            first_divergent = Some(first_divergent.map_or(seq, |s: u64| s.min(seq)));
        }
    }
    let lag = lags(snaps);
    Ok(Report {
        common_seq,
        highest_seq: snaps.iter().map(|s| s.seq_applied).max().unwrap_or(0),
        attempts: reading.attempts,
        centers: snaps
            .iter()
            .zip(&lag)
            .zip(&reading.hash_at_common)
            .enumerate()
            .map(|(i, ((s, l), h))| CenterJson {
                center: s.center.clone(),
                seq_applied: s.seq_applied,
                seq_committed: l.seq_committed,
                lag_entries: l.lag_entries,
                entries_past_common: l.entries_past_common,
                state_hash: format!("{:016x}", s.state_hash),
                state_hash_at_common: h.map(|h| format!("{h:016x}")),
                balances_compared: balances_compared(snaps, i),
                seq_unfinal_first: s.seq_unfinal_first,
                accounts: s.balances.len(),
                balance_total_minor: s.balance_total_minor.to_string(),
                held_total_minor: s.held_total_minor.to_string(),
                funded_total_minor: s.funded_total_minor.to_string(),
            })
            .collect(),
        first_divergent_seq: first_divergent,
        ok: differences.is_empty() && first_divergent.is_none(),
        differences: differences.iter().map(|d| d.to_string()).collect(),
    })
}
