//! `rtgs rebuild-journal`: after the broker lost its data (the nodes say `HALTED: the broker lost
//! data`), publish the journal again from the sequencer's outbox and raise the broker generation,
//! so that the halted nodes go on (`rtgs_engine::rebuild`, ARCHITECTURE.md "When the broker loses
//! its data"). Refuses a journal topic that still holds messages unless `--force`.

use clap::Args;
use rtgs_engine::rebuild::{rebuild_journal, RebuildConfig};
use std::process::ExitCode;

#[derive(Args)]
pub struct RebuildArgs {
    #[arg(long, env = "RTGS_BOOTSTRAP", default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    /// Topics PREFIX.inbound, PREFIX.journal, ... (as the nodes were started).
    #[arg(long, env = "RTGS_TOPIC_PREFIX", default_value = "rtgs")]
    pub topic_prefix: String,
    /// The sequencer's database (the outbox).
    #[arg(long, env = "RTGS_SEQ_DB", default_value = "rtgs_seq")]
    pub seq_db: String,
    #[command(flatten)]
    pub pg: crate::pg_args::PgArgs,
    /// Publish although the journal topic is not empty (it lost only part of its data).
    #[arg(long)]
    pub force: bool,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: RebuildArgs) -> anyhow::Result<ExitCode> {
    let json = args.json;
    let r = rebuild_journal(RebuildConfig {
        bootstrap: args.bootstrap,
        topic_prefix: args.topic_prefix,
        seq_db: args.seq_db,
        pg: args.pg.server(),
        force: args.force,
    })?;
    if json {
        let report = serde_json::json!({
            "journal_topic": r.journal_topic,
            "journal_end_before": r.journal_end_before,
            "batches": r.batches,
            "seq_last": r.seq_last,
            "broker_generation": r.broker_generation,
            "epoch": r.epoch,
        });
        println!("{report}");
    } else {
        println!(
            "rebuilt {}: {} batches published again (seqs 1..={}); broker generation {}, epoch {}. The halted \
             nodes go on by themselves.",
            r.journal_topic, r.batches, r.seq_last, r.broker_generation, r.epoch
        );
    }
    Ok(ExitCode::SUCCESS)
}
