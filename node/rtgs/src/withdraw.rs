//! `rtgs withdraw`: one withdrawal cycle of the withdrawal plugin on a running production
//! cluster started with `--withdrawal`.
//!
//! Journals the world's setup (the customers' and the vaults' ledger accounts opened and funded,
//! chains, assets and vaults registered, the timers of seconds), then `--requests` requests, and
//! waits until every center's status (`--status-file`, one per node) shows every request
//! journaled (`withdrawal_requests`), none open (`withdrawal_open`) for a moment (operators
//! retry some failures a moment after their alert), and one plugin state (the same
//! `plugin_state_hash` at the same `seq_snapshot`). It reports the withdrawal figures as JSON.
//! Without status files it only submits.
//!
//! `--customers`, `--vaults` and `--seed` must be the nodes' `--withdrawal-customers`,
//! `--withdrawal-vaults` and `--chain-seed`: each node builds that world into its own simulator.
//! Every command's `bmi` derives from the workload, so running it again soon submits nothing new
//! (the sequencer dedupes); a further cycle is `--no-setup --first-request N`. The plugin's
//! timers run on journal time: the nodes need idle ticks (never `RTGS_NO_IDLE_TICK`).

use crate::matching::{figure, submit};
use anyhow::Context;
use clap::Args;
use rtgs_core::entry::{CenterId, Command, Payload};
use rtgs_kafka::topics::TopicNames;
use rtgs_plugins::WithdrawalConfig;
use serde_json::Value;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Commands per inbound message.
const MESSAGE_COMMANDS_MAX: usize = 1_000;

/// None open for this long ends the cycle (an operator's retry comes within 60 world seconds).
const SETTLED: Duration = Duration::from_secs(2);

/// The figures a timeout shows per center.
const SHOWN_FIGURES: [&str; 5] =
    ["withdrawal_requests", "withdrawal_open", "owner_center", "seq_snapshot", "plugin_state_hash"];

#[derive(Args, Debug)]
pub struct WithdrawArgs {
    /// Requests to submit.
    #[arg(long, default_value_t = 1_000)]
    pub requests: u64,
    /// Number of the first request (from 0): a further cycle's come after the last one's.
    #[arg(long, default_value_t = 0)]
    pub first_request: u64,
    /// A further cycle on a cluster already set up: submit only the requests (sending the setup
    /// again after the sequencer forgot its `bmi`s would fund the accounts twice).
    #[arg(long)]
    pub no_setup: bool,
    /// Funded customer accounts (the nodes' --withdrawal-customers).
    #[arg(long, default_value_t = 100)]
    pub customers: u64,
    /// Vaults per chain (the nodes' --withdrawal-vaults).
    #[arg(long, default_value_t = 4)]
    pub vaults: u64,
    /// Seed of the world and the requests (the nodes' --chain-seed).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// A node's status file; repeat for every center to wait on.
    #[arg(long = "status-file")]
    pub status_files: Vec<PathBuf>,
    /// Origin center of the submitted commands.
    #[arg(long, default_value_t = 1)]
    pub origin: u8,
    #[arg(long, env = "RTGS_BOOTSTRAP", default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    #[arg(long, env = "RTGS_TOPIC_PREFIX", default_value = "rtgs")]
    pub topic_prefix: String,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout_s: u64,
}

impl WithdrawArgs {
    fn config(&self) -> anyhow::Result<WithdrawalConfig> {
        let config = WithdrawalConfig {
            customers: self.customers,
            vaults_per_chain: self.vaults,
            requests: self.requests,
            world_seed: self.seed,
            ..WithdrawalConfig::default()
        };
        rtgs_plugins::PluginsConfig::withdrawal(config.clone()).check()?;
        Ok(config)
    }
}

pub fn run(args: WithdrawArgs) -> anyhow::Result<ExitCode> {
    let config = args.config()?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(withdraw_cycle(&args, &config))
}

async fn withdraw_cycle(args: &WithdrawArgs, w: &WithdrawalConfig) -> anyhow::Result<ExitCode> {
    let topics = TopicNames::with_prefix(&args.topic_prefix);
    let producer = rtgs_kafka::clients::producer(&args.bootstrap, "withdraw")?;
    let origin = CenterId(args.origin);
    // One producer, one inbound topic: the sequencer journals the accounts before the
    // registrations and requests that name them.
    let submit_all = |payloads: Vec<(rtgs_core::entry::Bmi, Payload)>| {
        let (producer, topic) = (&producer, &topics.inbound);
        async move {
            let commands: Vec<Command> =
                payloads.into_iter().map(|(bmi, payload)| Command { origin, bmi, payload }).collect();
            for chunk in commands.chunks(MESSAGE_COMMANDS_MAX) {
                submit(producer, topic, chunk).await?;
            }
            anyhow::Ok(())
        }
    };
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs(args.timeout_s);
    if !args.no_setup {
        submit_all(w.setup().context("withdrawal setup")?).await?;
    }
    let last = args.first_request + args.requests;
    let requests = (args.first_request..last)
        .map(|n| w.request(n).map(|(bmi, pc)| (bmi, Payload::Plugin(pc))))
        .collect::<Result<Vec<_>, _>>()
        .context("withdrawal requests")?;
    submit_all(requests).await?;
    let statuses = wait(args, deadline, "every request journaled, none open, one plugin state", |s| {
        figure(s, "withdrawal_requests") >= last && figure(s, "withdrawal_open") == 0
    })
    .await?;
    let p = statuses.first().map(|s| s["plugins"].clone()).unwrap_or(Value::Null);
    let n = |name: &str| p[name].as_u64().unwrap_or(0);
    let report = serde_json::json!({
        "requests": n("withdrawal_requests"),
        "refused": n("withdrawal_refused"),
        "open": n("withdrawal_open"),
        "completed": n("withdrawal_completed"),
        "cancelled": n("withdrawal_cancelled"),
        "failed": n("withdrawal_failed"),
        "rejected": n("withdrawal_rejected"),
        "blocked": n("withdrawal_blocked"),
        "reversed": n("withdrawal_reversed"),
        "stale": n("withdrawal_stale"),
        "owner_center": n("owner_center"),
        "cycle_s": t0.elapsed().as_secs_f64(),
        "plugin_state_consistent": !statuses.is_empty(),
        "waited": !args.status_files.is_empty(),
    });
    println!("{report}");
    Ok(ExitCode::SUCCESS)
}

/// Waits until `done` has held for [`SETTLED`] on every center's status with the centers in one
/// plugin state (the same hash at the same snapshot seq); the statuses then. Nothing to wait for
/// without status files.
async fn wait(
    args: &WithdrawArgs,
    deadline: Instant,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> anyhow::Result<Vec<Value>> {
    if args.status_files.is_empty() {
        return Ok(Vec::new());
    }
    let mut done_since: Option<Instant> = None;
    loop {
        let statuses: Vec<Value> = args
            .status_files
            .iter()
            .map(|f| {
                std::fs::read(f)
                    .ok()
                    .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
                    .unwrap_or(Value::Null)
            })
            .collect();
        let state =
            |s: &Value| (s["plugins"]["seq_snapshot"].clone(), s["plugins"]["plugin_state_hash"].clone());
        let one_state = statuses.iter().all(|s| state(s) == state(&statuses[0]));
        if statuses.iter().all(&done) {
            let since = *done_since.get_or_insert_with(Instant::now);
            if one_state && since.elapsed() >= SETTLED {
                return Ok(statuses);
            }
        } else {
            done_since = None;
        }
        if Instant::now() > deadline {
            let shown: Vec<Value> = statuses
                .iter()
                .map(|s| {
                    let figures = SHOWN_FIGURES
                        .iter()
                        .map(|name| (name.to_string(), s["plugins"][name].clone()))
                        .collect();
                    Value::Object(figures)
                })
                .collect();
            anyhow::bail!("{what}: not after {} s; per center: {}", args.timeout_s, Value::Array(shown));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
