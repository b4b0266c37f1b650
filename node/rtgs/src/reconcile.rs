//! `rtgs reconcile`: compare the center databases of the production engine (seed 003 §10) —
//! watermarks, the state hash at the highest common seq (and, on a mismatch, the first seq whose
//! outcome or hash differs), balances, and each center's money total (balances and plugin holds
//! together). Prints the differences (`--json` for machines); the exit status is non-zero if there
//! is any.

use anyhow::Context;
use clap::Args;
use rtgs_pg::reconcile::{compare, first_divergent_seq, snapshot, state_hash_at, Difference};
use serde::Serialize;
use std::process::ExitCode;

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
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct CenterJson {
    center: String,
    seq_applied: u64,
    state_hash: String,
    seq_unfinal_first: u64,
    accounts: usize,
    balance_total_minor: String,
    held_total_minor: String,
    funded_total_minor: String,
}

#[derive(Serialize)]
struct Report {
    common_seq: u64,
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
        for c in &report.centers {
            println!(
                "{}: seq_applied {} state_hash {} accounts {} balances {} held {} funded {}",
                c.center,
                c.seq_applied,
                c.state_hash,
                c.accounts,
                c.balance_total_minor,
                c.held_total_minor,
                c.funded_total_minor
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
    let mut pools = Vec::new();
    let mut snaps = Vec::new();
    for i in 1..=args.centers {
        let db = format!("{}{i}", args.db_prefix);
        let pool = args.pg.server().pool(&db, 1)?;
        let snap = snapshot(&pool, &format!("DC{i}"))
            .await
            .with_context(|| format!("reading {db} on {}", args.pg.server().address()))?;
        snaps.push(snap);
        pools.push(pool);
    }
    let common_seq = snaps.iter().map(|s| s.seq_applied).min().unwrap_or(0);
    let mut hashes = Vec::new();
    for pool in &pools {
        hashes.push((common_seq, state_hash_at(pool, common_seq).await?.map(|(h, _)| h)));
    }
    let differences: Vec<Difference> = compare(&snaps, &hashes);
    let mut first_divergent = None;
    for pool in pools.iter().skip(1) {
        if let Some(seq) = first_divergent_seq(&pools[0], pool, common_seq).await? {
            first_divergent = Some(first_divergent.map_or(seq, |s: u64| s.min(seq)));
        }
    }
    Ok(Report {
        common_seq,
        centers: snaps
            .iter()
            .map(|s| CenterJson {
                center: s.center.clone(),
                seq_applied: s.seq_applied,
                state_hash: format!("{:016x}", s.state_hash),
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
