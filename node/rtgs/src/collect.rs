//! `rtgs collect`: one sweep cycle of the collection plugin on a running production cluster
//! started with `--collection`.
//!
//! Submits the workload's setup (relayer registrations) to the inbound topic, waits until every
//! center's status (`RTGS_STATUS_FILE` of each node, given as `--status-file`) shows every
//! deposit journaled (`collection_deposits`: the owner's chain simulator confirms them and its adapter journals them),
//! submits one `RunNow`, and waits until every center shows every deposit COLLECTED. Without
//! status files it only submits (setup, then `RunNow` at once: a `RunNow` that comes before the
//! deposits finds nothing to sweep). `--wallets` and `--relayers` must be the nodes'
//! `--collection-wallets` and `--collection-relayers`: each node builds that workload into its
//! own chain simulator.

use anyhow::Context;
use clap::Args;
use rdkafka::producer::FutureRecord;
use rtgs_collection::adapter::Workload;
use rtgs_core::codec;
use rtgs_core::entry::{CenterId, Command, Payload};
use rtgs_kafka::topics::TopicNames;
use serde_json::Value;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct CollectArgs {
    /// Deposit wallets (the nodes' --collection-wallets).
    #[arg(long, default_value_t = 500)]
    pub wallets: u64,
    /// Relayers to register (the nodes' --collection-relayers).
    #[arg(long, default_value_t = 20)]
    pub relayers: u64,
    /// Round of this cycle: the `RunNow`'s bmi is `RUN<round>` (default: from the clock).
    #[arg(long)]
    pub round: Option<u64>,
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
    #[arg(long, default_value_t = 120)]
    pub timeout_s: u64,
}

pub fn run(args: CollectArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(collect(&args))
}

async fn collect(args: &CollectArgs) -> anyhow::Result<ExitCode> {
    let topics = TopicNames::with_prefix(&args.topic_prefix);
    let producer = rtgs_kafka::clients::producer(&args.bootstrap, "collect")?;
    let w = Workload::new(args.wallets, args.relayers);
    let origin = CenterId(args.origin);
    let commands = |items: Vec<(rtgs_core::entry::Bmi, rtgs_core::entry::PluginCommand)>| -> Vec<Command> {
        items.into_iter().map(|(bmi, c)| Command { origin, bmi, payload: Payload::Plugin(c) }).collect()
    };
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs(args.timeout_s);
    for chunk in commands(w.setup_commands(rtgs_collection::types::ChainId(1))).chunks(1_000) {
        submit(&producer, &topics.inbound, chunk).await?;
    }
    wait(args, deadline, "every deposit journaled", "collection_deposits").await?;
    let queued_s = t0.elapsed().as_secs_f64();
    let round = args.round.unwrap_or_else(|| rtgs_engine::clock::wall_us() / 1_000);
    let t1 = Instant::now();
    submit(&producer, &topics.inbound, &commands(w.run_now(round).into_iter().collect())).await?;
    wait(args, deadline, "every deposit collected", "collection_rows_collected").await?;
    let report = serde_json::json!({
        "wallets": args.wallets,
        "relayers": args.relayers,
        "round": round,
        "queued_s": queued_s,
        "sweep_s": t1.elapsed().as_secs_f64(),
        "waited": !args.status_files.is_empty(),
    });
    println!("{report}");
    Ok(ExitCode::SUCCESS)
}

/// Waits until `figure` ≥ the wallets in every status file (nothing to wait for without any).
async fn wait(args: &CollectArgs, deadline: Instant, what: &str, figure: &str) -> anyhow::Result<()> {
    if args.status_files.is_empty() {
        return Ok(());
    }
    loop {
        let figures: Vec<u64> = args
            .status_files
            .iter()
            .map(|f| {
                std::fs::read(f)
                    .ok()
                    .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
                    .and_then(|s| s["plugins"][figure].as_u64())
                    .unwrap_or(0)
            })
            .collect();
        if figures.iter().all(|n| *n >= args.wallets) {
            return Ok(());
        }
        if Instant::now() > deadline {
            anyhow::bail!("{what}: not after {} s ({figure} per center: {figures:?})", args.timeout_s);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn submit(
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
