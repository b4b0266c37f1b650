//! `rtgs match`: one matching cycle of the matching plugin on a running production cluster
//! started with `--matching`.
//!
//! Opens and funds the workload's accounts (the LP's nostro, the sellers', the partners' credit
//! accounts), journals its settings (the LP account, the timings with `--quick-timings`, the
//! partners' windows), then sends the marketplace's opening offers — a node's simulated
//! marketplace never offers on its own, since it cannot know when the sellers' accounts exist —
//! and waits until every center's status (`--status-file`, one per node) shows every seller. It
//! then submits the orders and waits until every center shows them all journaled, none in
//! flight, and one plugin state (the same `plugin_state_hash` at the same `seq_snapshot`). It
//! reports the matching figures as JSON. Without status files it only submits.
//!
//! `--sellers` and `--seed` must be the nodes' `--matching-sellers` and `--matching-seed`: each
//! node builds that marketplace into its own simulator. Every command's `bmi` derives from the
//! workload, so running it again soon submits nothing new (the sequencer dedupes); a further
//! cycle is `--no-setup --first-order N`, its orders numbered after the last one's. The plugin's windows close on `Tick`s:
//! the nodes need idle ticks (never `RTGS_NO_IDLE_TICK`) for orders to finish.

use anyhow::Context;
use clap::Args;
use rdkafka::producer::FutureRecord;
use rtgs_core::codec;
use rtgs_core::entry::{Bmi, CenterId, Command, Payload, PluginCommand};
use rtgs_kafka::topics::TopicNames;
use rtgs_plugins::{MatchingConfig, MATCHING_IN_FLIGHT_FIGURES};
use serde_json::Value;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Commands per inbound message.
const MESSAGE_COMMANDS_MAX: usize = 1_000;

#[derive(Args, Debug)]
pub struct MatchArgs {
    /// Orders to submit.
    #[arg(long, default_value_t = 1_000)]
    pub orders: u64,
    /// Number of the first order (from 0): a further cycle's orders come after the last one's.
    #[arg(long, default_value_t = 0)]
    pub first_order: u64,
    /// A further cycle on a cluster already set up: submit only the orders (sending the setup
    /// again after the sequencer forgot its `bmi`s would fund the accounts twice).
    #[arg(long)]
    pub no_setup: bool,
    /// Sellers of the marketplace (the nodes' --matching-sellers).
    #[arg(long, default_value_t = 500)]
    pub sellers: u64,
    /// Seed of the marketplace and the orders (the nodes' --matching-seed).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The partners' window: P2P phase, LP phase and decision grace in seconds.
    #[arg(long, default_value = "180,120,300", value_parser = crate::plugin_flags::parse_window)]
    pub window_s: (u32, u32, u32),
    /// Journal the plugin's short timings (4 s leases, LP retries within 2 s): windows of seconds.
    #[arg(long)]
    pub quick_timings: bool,
    /// An order's life unless its user ends it [default: an hour].
    #[arg(long)]
    pub order_ttl_s: Option<u64>,
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

impl MatchArgs {
    fn config(&self) -> anyhow::Result<MatchingConfig> {
        let (p2p_phase_s, lp_phase_s, decision_grace_s) = self.window_s;
        let config = MatchingConfig {
            orders: self.orders,
            sellers: self.sellers,
            seed: self.seed,
            p2p_phase_s,
            lp_phase_s,
            decision_grace_s,
            quick_timings: self.quick_timings,
            order_ttl_s: self.order_ttl_s,
            ..MatchingConfig::default()
        };
        rtgs_plugins::PluginsConfig::matching(config.clone()).check()?;
        Ok(config)
    }
}

pub fn run(args: MatchArgs) -> anyhow::Result<ExitCode> {
    let config = args.config()?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(match_cycle(&args, &config))
}

async fn match_cycle(args: &MatchArgs, m: &MatchingConfig) -> anyhow::Result<ExitCode> {
    let topics = TopicNames::with_prefix(&args.topic_prefix);
    let producer = rtgs_kafka::clients::producer(&args.bootstrap, "match")?;
    let origin = CenterId(args.origin);
    let submit_all = |commands: Vec<Command>| {
        let (producer, topic) = (&producer, &topics.inbound);
        async move {
            for chunk in commands.chunks(MESSAGE_COMMANDS_MAX) {
                submit(producer, topic, chunk).await?;
            }
            anyhow::Ok(())
        }
    };
    let plugin = |items: Vec<(Bmi, PluginCommand)>| -> Vec<Command> {
        items.into_iter().map(|(bmi, c)| Command { origin, bmi, payload: Payload::Plugin(c) }).collect()
    };
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs(args.timeout_s);
    let w = m.workload();
    // Accounts first, then the settings and offers that name them: one producer, one inbound
    // topic, so the sequencer journals them in this order.
    let accounts: Vec<Command> =
        w.setup_payloads().into_iter().map(|(bmi, payload)| Command { origin, bmi, payload }).collect();
    if !args.no_setup {
        submit_all(accounts).await?;
        submit_all(plugin(w.setup_commands())).await?;
        submit_all(plugin(m.opening_offers())).await?;
    }
    wait(args, deadline, "every seller's offer journaled", |s| figure(s, "matching_sellers") >= m.sellers)
        .await?;
    let setup_s = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let now_us = rtgs_engine::clock::wall_us();
    let last = args.first_order + args.orders;
    submit_all(plugin((args.first_order..last).filter_map(|n| w.order(n, now_us)).collect())).await?;
    let statuses = wait(args, deadline, "every order through its sessions, one plugin state", |s| {
        figure(s, "matching_orders") >= last && MATCHING_IN_FLIGHT_FIGURES.iter().all(|f| figure(s, f) == 0)
    })
    .await?;
    let p = statuses.first().map(|s| s["plugins"].clone()).unwrap_or(Value::Null);
    let n = |name: &str| p[name].as_u64().unwrap_or(0);
    let report = serde_json::json!({
        "orders": n("matching_orders"),
        "sellers": m.sellers,
        "sessions": n("matching_sessions"),
        "bundles_committed": n("matching_bundles_committed"),
        "awaiting_user_decision": n("matching_awaiting_user_decision"),
        "closed_by_user": n("matching_closed_by_user"),
        "auto_closed": n("matching_auto_closed"),
        "cancelled": n("matching_cancelled"),
        "completed": n("matching_completed"),
        "expired": n("matching_expired"),
        "compensated": n("matching_compensated"),
        "escalated": n("matching_escalated"),
        "lp_already_committed": n("matching_lp_already_committed"),
        "dead_letters": n("matching_dead_letters"),
        "double_matches": n("matching_double_matches"),
        "lp_calls": n("matching_lp_calls"),
        "owner_center": n("owner_center"),
        "setup_s": setup_s,
        "cycle_s": t1.elapsed().as_secs_f64(),
        "plugin_state_consistent": !statuses.is_empty(),
        "waited": !args.status_files.is_empty(),
    });
    println!("{report}");
    Ok(ExitCode::SUCCESS)
}

/// A plugin figure of a node's status (0 if absent).
pub(crate) fn figure(status: &Value, name: &str) -> u64 {
    status["plugins"][name].as_u64().unwrap_or(0)
}

/// Waits until `done` holds for every center's status and the centers show one plugin state
/// (the same hash at the same snapshot seq); the statuses then. Nothing to wait for without
/// status files.
async fn wait(
    args: &MatchArgs,
    deadline: Instant,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> anyhow::Result<Vec<Value>> {
    if args.status_files.is_empty() {
        return Ok(Vec::new());
    }
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
        if statuses.iter().all(&done) && one_state {
            return Ok(statuses);
        }
        if Instant::now() > deadline {
            let shown: Vec<Value> = statuses
                .iter()
                .map(|s| {
                    let mut figures = serde_json::Map::new();
                    for name in ["matching_orders", "matching_sellers", "seq_snapshot", "plugin_state_hash"]
                        .iter()
                        .chain(MATCHING_IN_FLIGHT_FIGURES.iter())
                    {
                        figures.insert(name.to_string(), s["plugins"][name].clone());
                    }
                    Value::Object(figures)
                })
                .collect();
            anyhow::bail!("{what}: not after {} s; per center: {}", args.timeout_s, Value::Array(shown));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub(crate) async fn submit(
    producer: &rdkafka::producer::FutureProducer,
    topic: &str,
    commands: &[Command],
) -> anyhow::Result<()> {
    let mut body = Vec::with_capacity(commands.len() * 96);
    codec::encode_commands_frame(commands, &mut body);
    producer
        .send(FutureRecord::<(), _>::to(topic).payload(&body), Duration::from_secs(30))
        .await
        .map_err(|(e, _)| e)
        .with_context(|| format!("cannot submit to {topic}"))?;
    Ok(())
}
