//! `rtgs demo`: start the embedded cluster, drive it with an open- or closed-loop load, report.
//!
//! Setup (open and fund `--accounts` accounts) runs to finality first; then `--transfers`
//! transfers between random accounts (about 0.5% to an unknown account, so some are rejected
//! AC01; others run out of funds, AM04) are submitted through the three centers in turn.
//! Latency is submit → final as announced by the origin center; with `--rate` it is measured
//! from each transfer's *intended* send time, so a stalled pipeline cannot hide its queueing
//! (no coordinated omission).
//!
//! With `--collection`, every center also runs the collection plugin and the owner's effects go
//! to the chain simulator (on the adapter thread, its clock `--chain-time-scale` times faster
//! than the journal's). Before the transfers, a sweep cycle runs: `--collection-wallets`
//! deposits confirm on chain and are journaled, then one `RunNow` reads every balance and
//! sweeps every wallet through `--collection-relayers` relayers; the cycle time is from that
//! command to the last deposit COLLECTED in DC1's plugin state.
//!
//! With `--matching`, every center also runs the matching plugin and the owner's effects go to
//! the LP simulator and the simulated marketplace. Before the transfers, a matching cycle runs:
//! the workload's accounts (LP, sellers, partners) are opened and funded, the LP account, the
//! short timings and the partners' windows (2 s P2P, 2 s LP, 2 s grace unless
//! `--matching-window-s`) journaled; once every seller has offered, `--matching-orders` orders
//! are submitted (each living 30 s unless its user ends it) and the cycle ends when none is in
//! flight (no order open or matching, no session in a window, awaiting a decision or paying) in
//! DC1's plugin state.
//!
//! With `--withdrawal` (beside `--collection` or alone), every center also runs the withdrawal
//! plugin and the owner's effects go to its simulated world (custody signer, AML screener,
//! policy engine, one chain per family; faults on unless `--withdrawal-calm`). After the sweep
//! cycle and before the transfers, the workload's customer accounts are opened and funded, its
//! chains, assets and vaults registered, then `--withdrawal-requests` requests are submitted;
//! the cycle ends when DC1's plugin has every request and none open for 2 s (or after
//! `WITHDRAWAL_WAIT_S`: what is still open is reported as such). The report's `withdrawal`
//! counts the outcomes; the exit status requires every center's plugin state to be the same.

use anyhow::{bail, Context};
use clap::Args;
use hdrhistogram::Histogram;
use rtgs_core::entry::{AccountId, Bmi, CenterId, Command, Currency, Outcome, Payload, Transfer};
use rtgs_core::prng::Prng;
use rtgs_embedded::cluster::{ClientEvent, Cluster, ClusterConfig, ClusterReport, Figures, Submitter};
use rtgs_embedded::limits::SUBMISSION_COMMANDS_MAX;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Args, Clone, Debug)]
pub struct DemoArgs {
    /// Transfers to submit after setup.
    #[arg(long, default_value_t = 1_000_000)]
    pub transfers: u64,
    /// Accounts to open and fund before the transfers.
    #[arg(long, default_value_t = 10_000)]
    pub accounts: u64,
    /// Offered load in transfers per second (open loop); 0 = as fast as the cluster takes them.
    #[arg(long, default_value_t = 0)]
    pub rate: u64,
    /// Seed of the load generator (same seed, same transfers).
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Where the journal and checkpoints live. Kept afterwards; a later run resumes from it.
    /// Default: a temporary directory, removed at the end.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// A second copy of the journal (e.g. on another disk): every sync group is durable in both
    /// before any center sees it, and a frame damaged in one copy is repaired from the other at
    /// start (counted in the report).
    #[arg(long)]
    pub journal_mirror: Option<PathBuf>,
    /// Write submit → final latency per 100 ms of the transfers (p50, p99, max; CSV) to FILE:
    /// where the tail comes from, slice by slice.
    #[arg(long, value_name = "FILE")]
    pub latency_timeline: Option<PathBuf>,
    /// Print the report as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// Entries a center applies between two checkpoints of its state.
    #[arg(long, default_value_t = rtgs_embedded::limits::CHECKPOINT_INTERVAL_ENTRIES)]
    pub checkpoint_interval: u64,
    /// Centers in the embedded cluster.
    #[arg(long, default_value_t = 3)]
    pub centers: usize,
    /// Plugins (with `--collection`: a sweep cycle before the transfers; 100,000 wallets and
    /// 1,000 relayers unless set, the chain seeded with `--seed`; with `--withdrawal`: a
    /// withdrawal cycle, see the module docs).
    #[command(flatten)]
    pub plugins: crate::plugin_flags::PluginFlags,
}

impl DemoArgs {
    fn plugins(&self) -> anyhow::Result<rtgs_plugins::PluginsConfig> {
        let defaults = rtgs_plugins::CollectionConfig { chain_seed: self.seed, ..Default::default() };
        let matching = rtgs_plugins::MatchingConfig {
            orders: 10_000,
            sellers: 200,
            seed: self.seed,
            p2p_phase_s: 2,
            lp_phase_s: 2,
            decision_grace_s: 2,
            quick_timings: true,
            market_start_ms: MARKET_START_MS,
            order_ttl_s: Some(ORDER_TTL_S),
            ..Default::default()
        };
        self.plugins.config_with(defaults, matching)
    }
}

const CURRENCY: &[u8; 3] = b"EUR";
/// The simulated sellers offer this long after the cluster starts (their accounts are opened
/// first: an offer naming an unknown account is refused).
const MARKET_START_MS: u64 = 1_500;
/// A demo order's life: a trade the LP never completes (`--matching-lp-faults`) keeps its order
/// in payment until then.
const ORDER_TTL_S: u64 = 30;
/// A matching cycle that has orders in flight after this long failed.
const MATCHING_CYCLE_MAX: Duration = Duration::from_secs(300);
const FUNDING_MINOR: u64 = 100_000;
const AMOUNT_MINOR_MAX: u64 = 5_000;
/// One transfer in this many goes to an account that does not exist (rejected AC01).
const UNKNOWN_CREDITOR_ONE_IN: u64 = 200;

#[derive(Serialize)]
struct Latency {
    p50: u64,
    p99: u64,
    p999: u64,
    max: u64,
}

#[derive(Serialize)]
struct CenterJson {
    id: String,
    seq_applied: u64,
    state_hash: String,
    balance_total_minor: String,
    held_total_minor: String,
    funded_total_minor: String,
    seq_final_through: u64,
    finalized_total: u64,
    seq_resumed_from: u64,
    checkpoints_written: u64,
}

#[derive(Serialize, Default)]
struct CollectionJson {
    wallets: u64,
    relayers: u64,
    deposits: u64,
    rows_collected: u64,
    rows_queued: u64,
    batches: u64,
    batches_confirmed: u64,
    batches_failed: u64,
    swept_minor: u64,
    /// From the start to every deposit QUEUED (confirmed on chain, journaled).
    deposits_queued_s: f64,
    /// From `RunNow` to every deposit COLLECTED (reads, broadcasts, confirmations, webhooks).
    sweep_cycle_s: f64,
    effects_executed: u64,
    chain_broadcasts: u64,
    chain_already_known: u64,
    owner_center: u64,
    /// Every center holds the same plugin state (full hash).
    plugin_state_consistent: bool,
}

/// What the start found in the journal.
#[derive(Serialize)]
struct JournalJson {
    /// Torn tail cut at start (bytes past the durable end).
    truncated_bytes: u64,
    /// Frames repaired from the other copy at start (with `--journal-mirror`).
    repaired_frames: u64,
    repaired_bytes: u64,
    /// The first repairs: file, offset, bytes, what was there.
    repairs: Vec<String>,
    mirror: Option<String>,
}

/// The journal writer's `fdatasync`s (one per group, mark or rotation; a mirror's with its
/// journal's), microseconds.
#[derive(Serialize)]
struct SyncsJson {
    count: u64,
    p50_us: u64,
    p99_us: u64,
    p999_us: u64,
    max_us: u64,
    /// Syncs over 5 ms: each held up every batch behind it.
    over_5ms: u64,
}

fn syncs_json(t: &rtgs_embedded::journal::SyncTimes) -> SyncsJson {
    SyncsJson {
        count: t.count(),
        p50_us: t.quantile_us(0.5),
        p99_us: t.quantile_us(0.99),
        p999_us: t.quantile_us(0.999),
        max_us: t.max_us(),
        over_5ms: t.over_us(crate::serve::SLOW_SYNC_US),
    }
}

/// The sequencer's index of every `bmi` ever sequenced.
#[derive(Serialize)]
struct BmiIndexJson {
    lookups: u64,
    filter_positives: u64,
    recent_hits: u64,
    old_hits: u64,
    journal_reads: u64,
    run_block_reads: u64,
    runs: u64,
    run_entries: u64,
    merges: u64,
    filter_generations: u64,
    filter_mib: f64,
    replayed_at_open: u64,
}

#[derive(Serialize, Default)]
struct MatchingJson {
    orders: u64,
    sellers: u64,
    sessions: u64,
    bundles_committed: u64,
    awaiting_user_decision: u64,
    closed_by_user: u64,
    auto_closed: u64,
    cancelled: u64,
    completed: u64,
    expired: u64,
    compensated: u64,
    escalated: u64,
    lp_already_committed: u64,
    dead_letters: u64,
    /// Orders matched twice or whose legs do not cover them: must be 0.
    double_matches: u64,
    lp_calls: u64,
    legs_paid: u64,
    /// From the first order submitted to none in flight.
    cycle_s: f64,
    effects_executed: u64,
    owner_center: u64,
    /// Every center holds the same plugin state (full hash).
    plugin_state_consistent: bool,
}

#[derive(Serialize)]
struct Report {
    submitted: u64,
    settled: u64,
    rejected: u64,
    rejected_by_reason: BTreeMap<String, u64>,
    finalized: u64,
    refused: u64,
    setup_entries: u64,
    /// Final notices of an earlier run's entries, announced again after a restart.
    recovered_notices: u64,
    elapsed_s: f64,
    throughput_per_s: f64,
    offered_rate_per_s: u64,
    latency_us: Latency,
    centers: Vec<CenterJson>,
    journal_seq_last: u64,
    /// `Tick` entries journaled during the run (at least one a second, idle or loaded).
    ticks: u64,
    resumed_from_seq: u64,
    consistent: bool,
    conserved: bool,
    divergences: u64,
    errors: Vec<String>,
    peak_rss_mib: f64,
    data_dir: String,
    journal: JournalJson,
    /// How long the journal writer's `fdatasync`s took during the run.
    journal_syncs: SyncsJson,
    bmi_index: BmiIndexJson,
    #[serde(skip_serializing_if = "Option::is_none")]
    collection: Option<CollectionJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    matching: Option<MatchingJson>,
    withdrawal: Option<WithdrawalJson>,
}

#[derive(Serialize, Default)]
struct WithdrawalJson {
    requests: u64,
    /// Refused before they became withdrawals (an amount over the balance, a limit ...).
    refused: u64,
    completed: u64,
    cancelled: u64,
    failed: u64,
    rejected: u64,
    blocked: u64,
    /// Settlements reversed after a reorg took the transaction for good.
    reversed: u64,
    /// STALE at the end (none once the cycle finished).
    stale: u64,
    /// Not final at the end (none once the cycle finished).
    open: u64,
    /// Transactions the owners sent to the chains (a signed payload sent again included).
    chain_broadcasts: u64,
    /// From the first request to every withdrawal final.
    cycle_s: f64,
    /// Every center holds the same plugin state (full hash).
    plugin_state_consistent: bool,
}

pub fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    if args.accounts < 2 {
        bail!("--accounts must be at least 2");
    }
    let (data_dir, temporary) = match &args.data_dir {
        Some(d) => (d.clone(), false),
        None => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            (std::env::temp_dir().join(format!("rtgs-demo-{}-{nanos}", std::process::id())), true)
        }
    };
    let mut config = ClusterConfig::new(&data_dir);
    config.journal_mirror = args.journal_mirror.clone();
    config.centers = args.centers;
    config.checkpoint_interval_entries = args.checkpoint_interval.max(1);
    let plugins = args.plugins()?;
    let cluster = crate::serve::start_cluster(&config, &plugins)
        .with_context(|| format!("starting the cluster in {}", data_dir.display()))?;
    let resumed_from = cluster.recovery().journal.seq_last;
    let journal = journal_json(&args, &cluster.recovery().journal);
    if !args.json {
        eprintln!(
            "rtgs demo: {} centers, data dir {}{}, journal resumes after seq {resumed_from}, epoch {}",
            args.centers,
            data_dir.display(),
            if temporary { " (temporary)" } else { "" },
            cluster.recovery().epoch
        );
        if journal.truncated_bytes > 0 || journal.repaired_frames > 0 {
            eprintln!(
                "rtgs demo: journal: torn tail of {} bytes cut (with the zeros ahead after it), {} frames ({} bytes) repaired from the other copy",
                journal.truncated_bytes, journal.repaired_frames, journal.repaired_bytes
            );
        }
    }
    let sweep = match &plugins.collection {
        Some(c) => Some(sweep_cycle(&args, &cluster, c).context("collection sweep cycle")?),
        None => None,
    };
    let matched = match &plugins.matching {
        Some(m) => Some(matching_cycle(&args, &cluster, m).context("matching cycle")?),
        None => None,
    };
    let withdrawals = match &plugins.withdrawal {
        Some(w) => Some(withdrawal_cycle(&args, &cluster, w).context("withdrawal cycle")?),
        None => None,
    };
    let outcome = drive(&args, &cluster, resumed_from);
    let cluster_report = cluster.shutdown();
    if temporary {
        let _ = std::fs::remove_dir_all(&data_dir);
    }
    let run = outcome?;
    let mut report = build_report(&args, run, &cluster_report, resumed_from, &data_dir, journal);
    if let (Some(s), Some(c)) = (sweep, &plugins.collection) {
        report.collection = Some(collection_json(c, s, &cluster_report));
    }
    if let (Some(r), Some(m)) = (matched, &plugins.matching) {
        report.matching = Some(matching_json(m, r, &cluster_report));
    }
    if let Some(w) = withdrawals {
        report.withdrawal = Some(withdrawal_json(w, &cluster_report));
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_human(&report);
    }
    let collected_all =
        report.collection.as_ref().is_none_or(|c| c.rows_collected == c.wallets && c.plugin_state_consistent);
    let orders_expected = plugins.matching.as_ref().map_or(0, |m| m.orders);
    let matched_well = report
        .matching
        .as_ref()
        .is_none_or(|m| m.orders == orders_expected && m.double_matches == 0 && m.plugin_state_consistent);
    let withdrawal_consistent = report.withdrawal.as_ref().is_none_or(|w| w.plugin_state_consistent);
    let ok = collected_all
        && matched_well
        && withdrawal_consistent
        && report.consistent
        && report.conserved
        && report.errors.is_empty()
        && report.divergences == 0
        && report.finalized == report.submitted;
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

struct Run {
    submitted: u64,
    settled: u64,
    rejected: u64,
    refused: u64,
    reasons: BTreeMap<String, u64>,
    setup_entries: u64,
    elapsed: Duration,
    latency: Histogram<u64>,
    divergences: u64,
    recovered_notices: u64,
}

fn drive(args: &DemoArgs, cluster: &Cluster, run_id: u64) -> anyhow::Result<Run> {
    let currency = Currency::new(CURRENCY)?;
    let centers = args.centers as u64;
    let origin = |n: u64| CenterId((n % centers) as u8 + 1);
    // Setup: open and fund every account, then wait until all of it is final.
    let mut setup = Vec::new();
    for a in 1..=args.accounts {
        setup.push(Command {
            origin: origin(a),
            bmi: Bmi::numbered(&format!("O{run_id:x}-"), a)?,
            payload: Payload::AccountOpen { account: AccountId(a), currency },
        });
        setup.push(Command {
            origin: origin(a),
            bmi: Bmi::numbered(&format!("F{run_id:x}-"), a)?,
            payload: Payload::AccountFund { account: AccountId(a), amount_minor: FUNDING_MINOR },
        });
    }
    let setup_entries = setup.len() as u64;
    let submitter = cluster.submitter();
    let setup_thread = std::thread::spawn(move || -> anyhow::Result<()> {
        let mut it = setup.into_iter().peekable();
        while it.peek().is_some() {
            let chunk: Vec<Command> = it.by_ref().take(SUBMISSION_COMMANDS_MAX).collect();
            submitter.submit(chunk)?;
        }
        Ok(())
    });
    let mut ignored = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    let setup_prefixes = [format!("O{run_id:x}-"), format!("F{run_id:x}-")];
    let setup_run = collect(cluster, setup_entries, &setup_prefixes, None, &mut ignored, None)?;
    setup_thread.join().map_err(|_| anyhow::anyhow!("setup submitter panicked"))??;
    if setup_run.divergences > 0 {
        bail!("divergence during setup");
    }

    // Transfers.
    let started = Instant::now();
    let mut timeline = match &args.latency_timeline {
        Some(path) => Some(crate::timeline::Timeline::create(path, cluster.clock().now_us())?),
        None => None,
    };
    let generator = {
        let submitter = cluster.submitter();
        let args = args.clone();
        std::thread::Builder::new()
            .name("load".into())
            .spawn(move || generate(&args, run_id, submitter, currency))
            .context("starting the load generator")?
    };
    let mut latency = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    let prefixes = [format!("T{run_id:x}-")];
    let mut run =
        collect(cluster, args.transfers, &prefixes, Some(started), &mut latency, timeline.as_mut())?;
    if let Some(t) = timeline {
        t.finish()?;
    }
    run.recovered_notices += setup_run.recovered_notices;
    generator.join().map_err(|_| anyhow::anyhow!("load generator panicked"))??;
    run.elapsed = started.elapsed();
    run.latency = latency;
    run.setup_entries = setup_entries;
    Ok(run)
}

/// Submits the transfers: as fast as accepted, or paced to `rate` per second (open loop).
fn generate(args: &DemoArgs, run_id: u64, submitter: Submitter, currency: Currency) -> anyhow::Result<()> {
    let mut prng = Prng::new(args.seed);
    let prefix = format!("T{run_id:x}-");
    let centers = args.centers as u64;
    let chunk = if args.rate == 0 {
        SUBMISSION_COMMANDS_MAX as u64
    } else {
        // One submission per 200 µs of the schedule. A transfer waits for the last of its chunk
        // to be due (measured: its latency counts from its own due time), but every submission
        // wakes the generator, the sequencer and the pipeline after them on two shared cores:
        // at 100,000/s, 50 µs chunks gave p50 426–453 µs / p99 3.0–3.2 ms with 12.4 s of CPU
        // per 10 s run, 200 µs chunks p50 488–509 µs / p99 2.0–2.1 ms with 9.5 s
        // (bench/README.md, "Where the tail is made").
        (args.rate / 5_000).clamp(1, SUBMISSION_COMMANDS_MAX as u64)
    };
    let start_us = submitter.clock().now_us();
    let mut n = 0u64;
    while n < args.transfers {
        let count = chunk.min(args.transfers - n);
        let mut commands = Vec::with_capacity(count as usize);
        let mut at = Vec::with_capacity(count as usize);
        for i in n..n + count {
            let debtor = 1 + prng.below(args.accounts);
            let mut creditor = 1 + prng.below(args.accounts - 1);
            if creditor >= debtor {
                creditor += 1;
            }
            if prng.below(UNKNOWN_CREDITOR_ONE_IN) == 0 {
                creditor = args.accounts + 1 + prng.below(1_000);
            }
            commands.push(Command {
                origin: CenterId((i % centers) as u8 + 1),
                bmi: Bmi::numbered(&prefix, i)?,
                payload: Payload::Transfer(Transfer {
                    debtor: AccountId(debtor),
                    creditor: AccountId(creditor),
                    amount_minor: 1 + prng.below(AMOUNT_MINOR_MAX),
                    currency,
                }),
            });
            at.push(i.saturating_mul(1_000_000).checked_div(args.rate).map_or(0, |d| start_us + d));
        }
        if args.rate == 0 {
            submitter.submit(commands)?;
        } else {
            // Send when the last transfer of the chunk is due; each keeps its intended time.
            let due = at[at.len() - 1];
            loop {
                let now = submitter.clock().now_us();
                if now >= due {
                    break;
                }
                // Sleep, never spin: on a small host a spinning generator steals the pipeline's
                // cores. Oversleeping shows up in the latency (measured from the due time).
                std::thread::sleep(Duration::from_micros(due - now));
            }
            submitter.submit_at(commands, at)?;
        }
        n += count;
    }
    Ok(())
}

/// Receives events until `expected` notices of this run (bmi starting with one of `prefixes`) are
/// final; a progress line on stderr once a second (stdout stays clean for `--json`). Notices of earlier runs (re-announced after a crash:
/// announcement is at-least-once) are only counted.
fn collect(
    cluster: &Cluster,
    expected: u64,
    prefixes: &[String],
    started: Option<Instant>,
    latency: &mut Histogram<u64>,
    mut timeline: Option<&mut crate::timeline::Timeline>,
) -> anyhow::Result<Run> {
    let mut run = Run {
        submitted: expected,
        settled: 0,
        rejected: 0,
        refused: 0,
        reasons: BTreeMap::new(),
        setup_entries: 0,
        elapsed: Duration::ZERO,
        latency: Histogram::new(3)?,
        divergences: 0,
        recovered_notices: 0,
    };
    let clock_now = || cluster.clock().now_us();
    let mut last_progress = Instant::now();
    let mut last_finalized = 0u64;
    let mut idle_since = Instant::now();
    while run.settled + run.rejected + run.refused < expected {
        let event = match cluster.events().recv_timeout(Duration::from_millis(250)) {
            Ok(e) => {
                idle_since = Instant::now();
                Some(e)
            }
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => None,
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => bail!("the cluster stopped"),
        };
        if let Some(ClientEvent::Final(notices)) = &event {
            let now = clock_now();
            for n in notices {
                if !prefixes.iter().any(|p| n.bmi.as_bytes().starts_with(p.as_bytes())) {
                    run.recovered_notices += 1;
                    continue;
                }
                match n.outcome {
                    Outcome::Accepted => run.settled += 1,
                    Outcome::Rejected(r) => {
                        run.rejected += 1;
                        *run.reasons.entry(r.iso_code().to_string()).or_default() += 1;
                    }
                }
                if n.submitted_at_us > 0 {
                    let us = now.saturating_sub(n.submitted_at_us).max(1);
                    latency.saturating_record(us);
                    if let Some(t) = timeline.as_deref_mut() {
                        t.record(now, us)?;
                    }
                }
            }
        } else if let Some(ClientEvent::Refused(r)) = &event {
            // Refused plugin results (a duplicate after a failover) are not this run's.
            let ours =
                r.iter().filter(|r| prefixes.iter().any(|p| r.bmi.as_bytes().starts_with(p.as_bytes())));
            run.refused += ours.count() as u64;
        } else if let Some(ClientEvent::Divergence(msg)) = &event {
            run.divergences += 1;
            bail!("{msg}");
        }
        if idle_since.elapsed() > Duration::from_secs(30) {
            bail!("no progress for 30 s: {} of {expected} final", run.settled + run.rejected);
        }
        if let Some(start) = started {
            if last_progress.elapsed() >= Duration::from_secs(1) {
                let finalized = run.settled + run.rejected;
                let rate = (finalized - last_finalized) as f64 / last_progress.elapsed().as_secs_f64();
                eprintln!(
                    "[{:6.1}s] finalized {:>11} of {expected} ({:>9.0}/s)  p99 {:>6} us",
                    start.elapsed().as_secs_f64(),
                    finalized,
                    rate,
                    latency.value_at_quantile(0.99)
                );
                last_progress = Instant::now();
                last_finalized = finalized;
            }
        }
    }
    Ok(run)
}

fn rss_peak_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn build_report(
    args: &DemoArgs,
    run: Run,
    cluster: &ClusterReport,
    resumed_from: u64,
    data_dir: &std::path::Path,
    journal: JournalJson,
) -> Report {
    let first = cluster.centers.first();
    let consistent = cluster.centers.len() == args.centers
        && cluster.centers.iter().all(|c| {
            first.is_some_and(|f| {
                c.seq_applied == f.seq_applied
                    && c.state_hash == f.state_hash
                    && c.balance_total_minor == f.balance_total_minor
            }) && c.seq_applied == cluster.journal_seq_last
        });
    let conserved = !cluster.centers.is_empty()
        && cluster
            .centers
            .iter()
            .all(|c| c.conserved && c.balance_total_minor + c.held_total_minor == c.funded_total_minor);
    let finalized = run.settled + run.rejected;
    let secs = run.elapsed.as_secs_f64().max(1e-9);
    Report {
        submitted: run.submitted,
        settled: run.settled,
        rejected: run.rejected,
        rejected_by_reason: run.reasons,
        finalized,
        refused: run.refused,
        setup_entries: run.setup_entries,
        recovered_notices: run.recovered_notices,
        elapsed_s: (secs * 1000.0).round() / 1000.0,
        throughput_per_s: (finalized as f64 / secs).round(),
        offered_rate_per_s: args.rate,
        latency_us: Latency {
            p50: run.latency.value_at_quantile(0.5),
            p99: run.latency.value_at_quantile(0.99),
            p999: run.latency.value_at_quantile(0.999),
            max: run.latency.max(),
        },
        centers: cluster
            .centers
            .iter()
            .map(|c| CenterJson {
                id: c.id.to_string(),
                seq_applied: c.seq_applied,
                state_hash: format!("{:016x}", c.state_hash),
                balance_total_minor: c.balance_total_minor.to_string(),
                held_total_minor: c.held_total_minor.to_string(),
                funded_total_minor: c.funded_total_minor.to_string(),
                seq_final_through: c.seq_final_through,
                finalized_total: c.finalized_total,
                seq_resumed_from: c.seq_resumed_from,
                checkpoints_written: c.checkpoints_written,
            })
            .collect(),
        journal_seq_last: cluster.journal_seq_last,
        ticks: cluster.ticks,
        resumed_from_seq: resumed_from,
        consistent,
        conserved,
        divergences: run.divergences + cluster.centers.iter().map(|c| c.divergences_total).sum::<u64>(),
        errors: cluster.errors.clone(),
        peak_rss_mib: (rss_peak_mib() * 10.0).round() / 10.0,
        data_dir: data_dir.display().to_string(),
        journal,
        journal_syncs: syncs_json(&cluster.journal_syncs),
        bmi_index: bmi_index_json(&cluster.bmi_index),
        collection: None,
        matching: None,
        withdrawal: None,
    }
}

fn journal_json(args: &DemoArgs, tail: &rtgs_embedded::journal::JournalTail) -> JournalJson {
    JournalJson {
        truncated_bytes: tail.truncated_bytes,
        repaired_frames: tail.repaired_frames,
        repaired_bytes: tail.repaired_bytes,
        repairs: tail
            .repairs
            .iter()
            .map(|r| {
                format!("{} at byte {} ({} bytes): was {}", r.path.display(), r.offset, r.bytes, r.found)
            })
            .collect(),
        mirror: args.journal_mirror.as_ref().map(|m| m.display().to_string()),
    }
}

fn bmi_index_json(s: &rtgs_embedded::bmi_index::BmiIndexStats) -> BmiIndexJson {
    BmiIndexJson {
        lookups: s.lookups,
        filter_positives: s.filter_positives,
        recent_hits: s.recent_hits,
        old_hits: s.old_hits,
        journal_reads: s.journal_reads,
        run_block_reads: s.run_block_reads,
        runs: s.runs,
        run_entries: s.run_entries,
        merges: s.merges,
        filter_generations: s.filter_generations,
        filter_mib: (s.filter_bytes as f64 / (1 << 20) as f64 * 10.0).round() / 10.0,
        replayed_at_open: s.replayed_at_open,
    }
}

struct Sweep {
    deposits_queued: Duration,
    cycle: Duration,
    adapter: Figures,
}

fn figure(f: &Figures, name: &str) -> u64 {
    f.iter().find(|(n, _)| *n == name).map_or(0, |(_, v)| *v)
}

/// Waits until DC1's published plugin figures satisfy `done`, draining client events meanwhile
/// (plugin results are announced like any entry); bails after 60 s without getting there.
fn wait_figures(cluster: &Cluster, what: &str, done: impl Fn(&Figures) -> bool) -> anyhow::Result<()> {
    wait_figures_for(cluster, what, Duration::from_secs(60), done)
}

fn wait_figures_for(
    cluster: &Cluster,
    what: &str,
    limit: Duration,
    done: impl Fn(&Figures) -> bool,
) -> anyhow::Result<()> {
    let start = Instant::now();
    loop {
        if done(&cluster.plugin_figures(CenterId(1))) {
            return Ok(());
        }
        if start.elapsed() > limit {
            bail!("{what}: not done after {limit:?} ({:?})", cluster.plugin_figures(CenterId(1)));
        }
        match cluster.events().recv_timeout(Duration::from_millis(5)) {
            Ok(ClientEvent::Divergence(msg)) => bail!("{msg}"),
            Ok(_) | Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => bail!("the cluster stopped"),
        }
    }
}

fn submit_plugin(
    cluster: &Cluster,
    commands: Vec<(Bmi, rtgs_core::entry::PluginCommand)>,
) -> anyhow::Result<()> {
    let mut it = commands.into_iter().peekable();
    while it.peek().is_some() {
        let chunk = it
            .by_ref()
            .take(SUBMISSION_COMMANDS_MAX)
            .map(|(bmi, c)| Command { origin: CenterId(1), bmi, payload: Payload::Plugin(c) })
            .collect();
        cluster.submitter().submit(chunk)?;
    }
    Ok(())
}

/// Registers the relayers, waits for every deposit to be queued, runs the schedule once and
/// waits for every deposit to be collected.
fn sweep_cycle(
    args: &DemoArgs,
    cluster: &Cluster,
    c: &rtgs_plugins::CollectionConfig,
) -> anyhow::Result<Sweep> {
    let start = Instant::now();
    let w = c.workload();
    submit_plugin(cluster, w.setup_commands(rtgs_collection::types::ChainId(1)))?;
    let wallets = c.wallets;
    wait_figures(cluster, "deposits queued", |f| figure(f, "collection_rows_queued") >= wallets)?;
    let deposits_queued = start.elapsed();
    if !args.json {
        eprintln!(
            "collection: {wallets} deposits queued in {:.3} s; sweeping",
            deposits_queued.as_secs_f64()
        );
    }
    let cycle_start = Instant::now();
    submit_plugin(cluster, w.run_now(cluster.recovery().journal.seq_last + 1).into_iter().collect())?;
    wait_figures(cluster, "every deposit collected", |f| figure(f, "collection_rows_collected") >= wallets)?;
    let cycle = cycle_start.elapsed();
    if !args.json {
        eprintln!("collection: sweep cycle over {wallets} wallets in {:.3} s", cycle.as_secs_f64());
    }
    Ok(Sweep { deposits_queued, cycle, adapter: cluster.adapter_figures() })
}

struct Matched {
    cycle: Duration,
    adapter: Figures,
}

/// Opens and funds the workload's accounts, journals its settings, waits for every seller's
/// offer, submits the orders and waits until none is in flight.
fn matching_cycle(
    args: &DemoArgs,
    cluster: &Cluster,
    m: &rtgs_plugins::MatchingConfig,
) -> anyhow::Result<Matched> {
    let w = m.workload();
    let mut it = w.setup_payloads().into_iter().peekable();
    while it.peek().is_some() {
        let chunk = it
            .by_ref()
            .take(SUBMISSION_COMMANDS_MAX)
            .map(|(bmi, payload)| Command { origin: CenterId(1), bmi, payload })
            .collect();
        cluster.submitter().submit(chunk)?;
    }
    submit_plugin(cluster, w.setup_commands())?;
    let sellers = m.sellers;
    wait_figures(cluster, "every seller offered", |f| figure(f, "matching_sellers") >= sellers)?;
    let start = Instant::now();
    let now_us = cluster.clock().now_us();
    submit_plugin(cluster, (0..m.orders).filter_map(|n| w.order(n, now_us)).collect())?;
    if !args.json {
        eprintln!("matching: {} orders submitted to {sellers} sellers and the LP", m.orders);
    }
    let orders = m.orders;
    wait_figures_for(cluster, "no order in flight", MATCHING_CYCLE_MAX, |f| {
        figure(f, "matching_orders") >= orders
            && rtgs_plugins::MATCHING_IN_FLIGHT_FIGURES.iter().all(|n| figure(f, n) == 0)
    })?;
    let cycle = start.elapsed();
    if !args.json {
        eprintln!("matching: {orders} orders through sessions in {:.3} s", cycle.as_secs_f64());
    }
    Ok(Matched { cycle, adapter: cluster.adapter_figures() })
}

fn matching_json(m: &rtgs_plugins::MatchingConfig, r: Matched, cluster: &ClusterReport) -> MatchingJson {
    let f = cluster.centers.first().map(|c| c.plugin_figures.clone()).unwrap_or_default();
    let first_hash = cluster.centers.first().map(|c| c.plugin_state_hash);
    MatchingJson {
        orders: figure(&f, "matching_orders"),
        sellers: m.sellers,
        sessions: figure(&f, "matching_sessions"),
        bundles_committed: figure(&f, "matching_bundles_committed"),
        awaiting_user_decision: figure(&f, "matching_awaiting_user_decision"),
        closed_by_user: figure(&f, "matching_closed_by_user"),
        auto_closed: figure(&f, "matching_auto_closed"),
        cancelled: figure(&f, "matching_cancelled"),
        completed: figure(&f, "matching_completed"),
        expired: figure(&f, "matching_expired"),
        compensated: figure(&f, "matching_compensated"),
        escalated: figure(&f, "matching_escalated"),
        lp_already_committed: figure(&f, "matching_lp_already_committed"),
        dead_letters: figure(&f, "matching_dead_letters"),
        double_matches: figure(&f, "matching_double_matches"),
        lp_calls: figure(&f, "matching_lp_calls"),
        legs_paid: figure(&f, "matching_legs_paid"),
        cycle_s: (r.cycle.as_secs_f64() * 1000.0).round() / 1000.0,
        effects_executed: figure(&r.adapter, "adapter_effects_executed"),
        owner_center: figure(&f, "owner_center"),
        plugin_state_consistent: cluster.centers.iter().all(|c| Some(c.plugin_state_hash) == first_hash),
    }
}

/// How long the withdrawal cycle may take (wall clock: the plugin's timers run on journal time,
/// seconds in the demo's settings): this, plus one second per [`WITHDRAWAL_WAIT_REQUESTS_PER_S`]
/// requests (the simulated world's vaults bound how many are in flight at once: 100,000
/// requests over 64 vaults per chain take about two minutes here).
const WITHDRAWAL_WAIT_S: u64 = 120;
const WITHDRAWAL_WAIT_REQUESTS_PER_S: u64 = 1_000;

/// None open for this long ends the cycle (an operator's retry comes within 60 world seconds:
/// 60 ms at the default scale).
const WITHDRAWAL_SETTLED: Duration = Duration::from_secs(2);

struct WithdrawalCycle {
    cycle: Duration,
    adapter: Figures,
}

/// Opens and funds the workload's accounts, registers its chains, assets and vaults, submits
/// the requests and waits until none is open (see the module docs).
fn withdrawal_cycle(
    args: &DemoArgs,
    cluster: &Cluster,
    w: &rtgs_plugins::WithdrawalConfig,
) -> anyhow::Result<WithdrawalCycle> {
    let setup = w.setup().context("withdrawal setup")?;
    submit_payloads(cluster, setup)?;
    let start = Instant::now();
    let requests = (0..w.requests)
        .map(|n| w.request(n))
        .collect::<Result<Vec<_>, _>>()
        .context("withdrawal requests")?;
    submit_plugin(cluster, requests)?;
    let n = w.requests;
    let wait_s = WITHDRAWAL_WAIT_S + n / WITHDRAWAL_WAIT_REQUESTS_PER_S;
    let deadline = Instant::now() + Duration::from_secs(wait_s);
    let mut ended_since: Option<Instant> = None;
    loop {
        let f = cluster.plugin_figures(CenterId(1));
        if figure(&f, "withdrawal_requests") >= n && figure(&f, "withdrawal_open") == 0 {
            // Operators retry some failures a moment after their alert: ended means ended for
            // a while, not for an instant.
            let since = *ended_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= WITHDRAWAL_SETTLED {
                break;
            }
        } else {
            ended_since = None;
        }
        if Instant::now() > deadline {
            eprintln!("withdrawal: not every withdrawal final after {wait_s} s; reporting");
            break;
        }
        match cluster.events().recv_timeout(Duration::from_millis(5)) {
            Ok(ClientEvent::Divergence(msg)) => bail!("{msg}"),
            Ok(_) | Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => bail!("the cluster stopped"),
        }
    }
    let cycle = start.elapsed();
    if !args.json {
        eprintln!("withdrawal: {n} requests through their lifecycle in {:.3} s", cycle.as_secs_f64());
    }
    Ok(WithdrawalCycle { cycle, adapter: cluster.adapter_figures() })
}

/// Submits any payloads in order (ledger accounts before the plugin commands that use them).
fn submit_payloads(cluster: &Cluster, payloads: Vec<(Bmi, Payload)>) -> anyhow::Result<()> {
    let mut it = payloads.into_iter().peekable();
    while it.peek().is_some() {
        let chunk = it
            .by_ref()
            .take(SUBMISSION_COMMANDS_MAX)
            .map(|(bmi, payload)| Command { origin: CenterId(1), bmi, payload })
            .collect();
        cluster.submitter().submit(chunk)?;
    }
    Ok(())
}

fn withdrawal_json(w: WithdrawalCycle, cluster: &ClusterReport) -> WithdrawalJson {
    let f = cluster.centers.first().map(|c| c.plugin_figures.clone()).unwrap_or_default();
    let first_hash = cluster.centers.first().map(|c| c.plugin_state_hash);
    WithdrawalJson {
        requests: figure(&f, "withdrawal_requests"),
        refused: figure(&f, "withdrawal_refused"),
        completed: figure(&f, "withdrawal_completed"),
        cancelled: figure(&f, "withdrawal_cancelled"),
        failed: figure(&f, "withdrawal_failed"),
        rejected: figure(&f, "withdrawal_rejected"),
        blocked: figure(&f, "withdrawal_blocked"),
        reversed: figure(&f, "withdrawal_reversed"),
        stale: figure(&f, "withdrawal_stale"),
        open: figure(&f, "withdrawal_open"),
        chain_broadcasts: figure(&w.adapter, "withdrawal_chain_broadcasts"),
        cycle_s: (w.cycle.as_secs_f64() * 1000.0).round() / 1000.0,
        plugin_state_consistent: cluster.centers.iter().all(|c| Some(c.plugin_state_hash) == first_hash),
    }
}

fn collection_json(c: &rtgs_plugins::CollectionConfig, s: Sweep, cluster: &ClusterReport) -> CollectionJson {
    let f = cluster.centers.first().map(|c| c.plugin_figures.clone()).unwrap_or_default();
    let first_hash = cluster.centers.first().map(|c| c.plugin_state_hash);
    let round = |d: Duration| (d.as_secs_f64() * 1000.0).round() / 1000.0;
    CollectionJson {
        wallets: c.wallets,
        relayers: c.relayers,
        deposits: figure(&f, "collection_deposits"),
        rows_collected: figure(&f, "collection_rows_collected"),
        rows_queued: figure(&f, "collection_rows_queued"),
        batches: figure(&f, "collection_batches"),
        batches_confirmed: figure(&f, "collection_batches_confirmed"),
        batches_failed: figure(&f, "collection_batches_failed"),
        swept_minor: figure(&f, "collection_swept_minor"),
        deposits_queued_s: round(s.deposits_queued),
        sweep_cycle_s: round(s.cycle),
        effects_executed: figure(&s.adapter, "adapter_effects_executed"),
        chain_broadcasts: figure(&s.adapter, "chain_broadcasts"),
        chain_already_known: figure(&s.adapter, "chain_already_known"),
        owner_center: figure(&f, "owner_center"),
        plugin_state_consistent: cluster.centers.iter().all(|c| Some(c.plugin_state_hash) == first_hash),
    }
}

fn print_human(r: &Report) {
    println!("rtgs demo report");
    println!("  submitted          {:>12}", r.submitted);
    println!("  settled (ACCC)     {:>12}", r.settled);
    println!("  rejected (RJCT)    {:>12}  {:?}", r.rejected, r.rejected_by_reason);
    println!("  finalized          {:>12}", r.finalized);
    println!("  elapsed            {:>12.3} s", r.elapsed_s);
    println!("  throughput         {:>12.0} finalized/s", r.throughput_per_s);
    println!(
        "  latency submit→final  p50 {} us  p99 {} us  p999 {} us  max {} us",
        r.latency_us.p50, r.latency_us.p99, r.latency_us.p999, r.latency_us.max
    );
    println!("  centers:");
    for c in &r.centers {
        println!(
            "    {}  seq_applied {}  state_hash {}  balance_total_minor {}  final_through {}",
            c.id, c.seq_applied, c.state_hash, c.balance_total_minor, c.seq_final_through
        );
    }
    println!("  consistent         {}", r.consistent);
    println!("  conserved          {}", r.conserved);
    println!("  peak RSS           {:.1} MiB", r.peak_rss_mib);
    let b = &r.bmi_index;
    println!(
        "  bmi index          {} look-ups, {} filter positives ({} recent, {} old hits), {} runs holding {} bmis, filter {:.1} MiB",
        b.lookups, b.filter_positives, b.recent_hits, b.old_hits, b.runs, b.run_entries, b.filter_mib
    );
    if r.journal.truncated_bytes > 0 || r.journal.repaired_frames > 0 {
        println!(
            "  journal at start   torn tail of {} bytes cut, {} frames repaired",
            r.journal.truncated_bytes, r.journal.repaired_frames
        );
    }
    let y = &r.journal_syncs;
    println!(
        "  journal fdatasync  {} syncs  p50 {} us  p99 {} us  p999 {} us  max {} us  ({} over 5 ms)",
        y.count, y.p50_us, y.p99_us, y.p999_us, y.max_us, y.over_5ms
    );
    // One in a thousand syncs that long is already most of the latency's tail.
    if y.over_5ms > 0 && y.over_5ms * 1000 >= y.count {
        println!(
            "  (slow syncs hold up every batch behind them; bench/disk-check.sh tells whether this disk stalls when a core is busy)"
        );
    }
    if let Some(c) = &r.collection {
        println!("  collection (chain simulator, {} wallets, {} relayers):", c.wallets, c.relayers);
        println!("    deposits queued    {:>12}  in {:.3} s", c.deposits, c.deposits_queued_s);
        println!("    sweep cycle        {:>12.3} s  (RunNow → every deposit COLLECTED)", c.sweep_cycle_s);
        println!("    rows collected     {:>12}  queued {}", c.rows_collected, c.rows_queued);
        println!(
            "    batches confirmed  {:>12}  of {} (failed {})",
            c.batches_confirmed, c.batches, c.batches_failed
        );
        println!("    swept (minor)      {:>12}", c.swept_minor);
        println!(
            "    effects executed   {:>12}  broadcasts {}  already known {}  owner DC{}",
            c.effects_executed, c.chain_broadcasts, c.chain_already_known, c.owner_center
        );
        println!("    plugin state consistent {}", c.plugin_state_consistent);
    }
    if let Some(m) = &r.matching {
        println!("  matching (LP simulator, marketplace of {} sellers):", m.sellers);
        println!("    orders             {:>12}  through sessions in {:.3} s", m.orders, m.cycle_s);
        println!(
            "    sessions           {:>12}  bundles committed {}  completed {}",
            m.sessions, m.bundles_committed, m.completed
        );
        println!(
            "    user decisions     awaiting {}  closed by user {}  auto-closed {}  cancelled {}",
            m.awaiting_user_decision, m.closed_by_user, m.auto_closed, m.cancelled
        );
        println!(
            "    LP                 calls {}  compensated {}  escalated {}  already committed {}",
            m.lp_calls, m.compensated, m.escalated, m.lp_already_committed
        );
        println!("    double matches     {:>12}", m.double_matches);
        println!("    plugin state consistent {}", m.plugin_state_consistent);
    }
    if let Some(w) = &r.withdrawal {
        println!("  withdrawal (simulated custody, screener, policy engine and chains):");
        println!("    requests           {:>12}  refused {}  in {:.3} s", w.requests, w.refused, w.cycle_s);
        println!(
            "    completed          {:>12}  cancelled {}  failed {}  rejected {}  blocked {}",
            w.completed, w.cancelled, w.failed, w.rejected, w.blocked
        );
        println!("    reversed           {:>12}  stale {}  open {}", w.reversed, w.stale, w.open);
        println!("    chain broadcasts   {:>12}", w.chain_broadcasts);
        println!("    plugin state consistent {}", w.plugin_state_consistent);
    }
    for e in &r.errors {
        println!("  error: {e}");
    }
}
