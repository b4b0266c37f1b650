//! # rtgs-pg: PostgreSQL adapters of the production engine
//!
//! # Layout
//! Thin I/O around the core's state machines; no decisions live here.
//!
//! * [`migrate`] — applies `migrations/` (embedded at build time) forward-only, once per file,
//!   under an advisory lock; creates databases.
//! * [`sequencer_store`] — the sequencer's durable-before-publish outbox with the fenced
//!   conditional update of the one sequencer row and every `bmi` ever sequenced (a unique index,
//!   written in the batch's transaction, looked up per batch); leader takeover (epoch bump,
//!   unpublished rows, `bmi` backfill of older databases).
//! * [`center_store`] — one center's transaction per commit of the core's `Center` (applied
//!   entries by binary COPY, changed balances and holds by UNNEST, finality ranges, watermark and
//!   stream positions) and its restore.
//! * [`plugin_store`] — the plugin host's state per plugin (`plugin_state`, migration 0004), saved inside the
//!   caller's batch transaction or standalone, and loaded (hash-checked) into a host.
//! * [`dev`] — start the local PostgreSQL through `scripts/infra-up.sh`, fresh test databases.
//! * [`reconcile`] — compares the center databases (watermarks, state hashes, balances, totals).
//!
//! The production engine that drives these is `rtgs-engine` (`node/engine`).

pub mod center_store;
pub mod dev;
pub mod migrate;
pub mod plugin_store;
pub mod reconcile;
pub mod sequencer_store;

/// Errors of the stores. A fenced or out-of-order write is a value the caller acts on.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("postgres: {0}")]
    Pg(#[from] tokio_postgres::Error),
    #[error("connection pool: {0}")]
    Pool(#[from] deadpool_postgres::PoolError),
    #[error("fenced: another sequencer leader took over (epoch {epoch} is no longer current or seq {seq_first} does not follow)")]
    Fenced { epoch: u32, seq_first: u64 },
    #[error(
        "batch starting at seq {seq_first} does not follow the watermark {seq_applied}: never applied twice"
    )]
    OutOfOrder { seq_first: u64, seq_applied: u64 },
    #[error("stored data is inconsistent: {0}")]
    Corrupt(String),
    #[error("a bmi of the batch starting at seq {seq_first} is already sequenced (unique index sequenced_bmi): {detail}")]
    BmiSequenced { seq_first: u64, detail: String },
}

/// A pool for `dbname` on the given server (`host`, `port`, `user`, `password`).
pub fn pool(
    host: &str,
    port: u16,
    user: &str,
    password: &str,
    dbname: &str,
    size: usize,
) -> Result<deadpool_postgres::Pool, StoreError> {
    let mut cfg = deadpool_postgres::Config::new();
    cfg.host = Some(host.to_string());
    cfg.port = Some(port);
    cfg.user = Some(user.to_string());
    cfg.password = Some(password.to_string());
    cfg.dbname = Some(dbname.to_string());
    cfg.pool = Some(deadpool_postgres::PoolConfig::new(size));
    cfg.create_pool(Some(deadpool_postgres::Runtime::Tokio1), tokio_postgres::NoTls)
        .map_err(|e| StoreError::Corrupt(format!("pool config: {e}")))
}
