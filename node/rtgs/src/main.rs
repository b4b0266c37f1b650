//! # rtgs: the node binary
//!
//! # Layout
//! * `demo` ([`demo`]) — the embedded 3-center cluster with a built-in load generator and report.
//! * `sim` ([`sim`]) — the deterministic simulator over many seeds, or one seed to replay.
//! * `verify` ([`verify`]) — audit a data directory: replay the journal, compare checkpoints.
//! * `node` ([`node`]) — one center of the production engine (Kafka journal + PostgreSQL).
//! * `load` ([`load`]) — submit transfers to a running production cluster and measure them.
//! * `http-load` ([`http_load`]) — signed HTTP requests against `rtgs serve`, measured.
//! * `collect` ([`collect`]) — one sweep cycle of the collection plugin on a production cluster.
//! * [`matching`] — `rtgs match`: one matching cycle of the matching plugin on a production
//!   cluster: the workload's accounts, settings and opening offers, then the orders.
//! * [`withdraw`] — `rtgs withdraw`: one withdrawal cycle of the withdrawal plugin on a
//!   production cluster: the world's accounts, chains, assets, vaults and timers, then the requests.
//! * `rebuild-journal` ([`rebuild`]) — publish the journal again from the sequencer's outbox after
//!   the broker lost its data (the nodes halt until then).
//! * `reconcile` ([`reconcile`]) — compare the production engine's center databases.
//! * `status` ([`status`]) — every center of a running production cluster, from each node's
//!   `GET /status`.
//! * `ops` ([`ops`]) — plugin operations (collection, withdrawal, matching, plugin owners) as
//!   signed operator requests to a node's API.
//! * `serve` ([`serve`]) — the embedded cluster behind the participant HTTP API (`rtgs-api`).
//! * [`plugin_flags`] — the plugin flags every command shares, built into `rtgs_plugins`'s one
//!   `PluginsConfig`.
//! * [`pg_args`] — the PostgreSQL connection flags of the production commands.
//! * [`timeline`] — `demo --latency-timeline`: latency per 100 ms slice, as CSV.
//!
//! `anyhow` lives only here, at the binary's edge; the libraries return typed errors.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod collect;
mod demo;
mod http_load;
mod load;
mod matching;
mod node;
mod ops;
mod pg_args;
mod plugin_flags;
mod rebuild;
mod reconcile;
mod serve;
mod sim;
mod status;
mod timeline;
mod verify;
mod withdraw;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "rtgs", version, about = "RTGS three-center consensus node")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once at start: the size of the largest command's arguments does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Run the embedded three-center cluster under a built-in load and report.
    Demo(demo::DemoArgs),
    /// Run the deterministic simulator (many seeds, or replay one).
    Sim(sim::SimArgs),
    /// Audit a stopped cluster's data directory against its journal.
    Verify(verify::VerifyArgs),
    /// Run one center of the production engine (Kafka + PostgreSQL); see scripts/run-dc1.sh.
    Node(Box<node::NodeArgs>),
    /// Submit transfers to a running production cluster; report throughput and latency.
    Load(load::LoadArgs),
    /// Sweep cycle of the collection plugin on a production cluster started with --collection.
    Collect(collect::CollectArgs),
    /// Matching cycle of the matching plugin on a production cluster started with --matching.
    Match(matching::MatchArgs),
    /// Withdrawal cycle of the withdrawal plugin on a production cluster started with --withdrawal.
    Withdraw(withdraw::WithdrawArgs),
    /// Compare the center databases of the production engine at their common seq (exit 1 on any
    /// difference; lag is reported, not a difference).
    Reconcile(reconcile::ReconcileArgs),
    /// Publish the journal again from the outbox after the broker lost its data.
    RebuildJournal(rebuild::RebuildArgs),
    /// Every center of a running production cluster: up, leader, seqs, lag, halted (exit 1 unless
    /// every center is up and none halted).
    Status(status::StatusArgs),
    /// Run the embedded cluster behind the participant HTTP API on 127.0.0.1:8080+PORT_OFFSET.
    Serve(serve::ServeArgs),
    /// Load a running `rtgs serve` with signed HTTP requests; report requests/s and latency.
    HttpLoad(http_load::HttpLoadArgs),
    /// Plugin operations through a node's API (collection, withdrawal, matching, plugin owners):
    /// signed operator requests; exit 1 with the API's code and message on a refusal.
    Ops(ops::OpsArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // After the allocator's start (it turned huge pages off for the whole process): huge pages
    // for the `bmi` index's resident tables only, where the kernel allows it.
    rtgs_embedded::bmi_index::huge_pages_where_advised();
    let result = match cli.command {
        Command::Demo(args) => demo::run(args),
        Command::Sim(args) => sim::run(args),
        Command::Verify(args) => verify::run(args),
        Command::Node(args) => node::run(*args),
        Command::Load(args) => load::run(args),
        Command::Collect(args) => collect::run(args),
        Command::Match(args) => matching::run(args),
        Command::Withdraw(args) => withdraw::run(args),
        Command::Reconcile(args) => reconcile::run(args),
        Command::RebuildJournal(args) => rebuild::run(args),
        Command::Status(args) => status::run(args),
        Command::Serve(args) => serve::run(args),
        Command::HttpLoad(args) => http_load::run(args),
        Command::Ops(args) => ops::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rtgs: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
