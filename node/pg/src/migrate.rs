//! Forward-only migrations, embedded from `migrations/` at build time. Each file is applied once,
//! in order, in its own transaction, recorded in `schema_migrations` (the same table
//! `scripts/init-3centers-db.sh` uses), under an advisory lock so concurrent starts are safe.

use crate::StoreError;
use tokio_postgres::Client;

/// Which database a schema belongs to.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Schema {
    /// `rtgs_seq`: the sequencer row and the outbox.
    Sequencer,
    /// `rtgs_dc1..3`: one center.
    Center,
}

const SEQUENCER: &[(&str, &str)] = &[
    ("0001_init", include_str!("../../../migrations/sequencer/0001_init.sql")),
    ("0002_outbox_uncompressed", include_str!("../../../migrations/sequencer/0002_outbox_uncompressed.sql")),
    ("0003_sequenced_bmi", include_str!("../../../migrations/sequencer/0003_sequenced_bmi.sql")),
    ("0004_broker_generation", include_str!("../../../migrations/sequencer/0004_broker_generation.sql")),
    ("0005_scoped_bmi", include_str!("../../../migrations/sequencer/0005_scoped_bmi.sql")),
];
const CENTER: &[(&str, &str)] = &[
    ("0001_init", include_str!("../../../migrations/center/0001_init.sql")),
    ("0002_account_fillfactor", include_str!("../../../migrations/center/0002_account_fillfactor.sql")),
    ("0003_notice_watermark", include_str!("../../../migrations/center/0003_notice_watermark.sql")),
    ("0004_plugin_state", include_str!("../../../migrations/center/0004_plugin_state.sql")),
    ("0005_holds", include_str!("../../../migrations/center/0005_holds.sql")),
    ("0006_broker_generation", include_str!("../../../migrations/center/0006_broker_generation.sql")),
    ("0007_statement_line", include_str!("../../../migrations/center/0007_statement_line.sql")),
    ("0008_acks_published", include_str!("../../../migrations/center/0008_acks_published.sql")),
    ("0009_account_change", include_str!("../../../migrations/center/0009_account_change.sql")),
    ("0010_applied_batch", include_str!("../../../migrations/center/0010_applied_batch.sql")),
];
const LOCK_KEY: i64 = 0x5254_4753; // "RTGS"

/// Applies what is missing; returns the versions applied now.
pub async fn migrate(client: &mut Client, schema: Schema) -> Result<Vec<&'static str>, StoreError> {
    let files = match schema {
        Schema::Sequencer => SEQUENCER,
        Schema::Center => CENTER,
    };
    client.batch_execute("SET client_min_messages = warning").await?;
    // The bookkeeping table is created under the same lock as the migrations: two nodes
    // starting together on an empty database would otherwise race on `CREATE TABLE IF NOT
    // EXISTS`, which PostgreSQL does not serialize (the loser fails with "relation already
    // exists" or a unique violation on pg_type).
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK_KEY]).await?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
             version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
    )
    .await?;
    tx.commit().await?;
    let mut applied = Vec::new();
    for (version, sql) in files {
        let tx = client.transaction().await?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK_KEY]).await?;
        let done = tx.query_opt("SELECT 1 FROM schema_migrations WHERE version = $1", &[version]).await?;
        if done.is_none() {
            tx.batch_execute(sql).await?;
            tx.execute("INSERT INTO schema_migrations (version) VALUES ($1)", &[version]).await?;
            applied.push(*version);
        }
        tx.commit().await?;
    }
    Ok(applied)
}

/// Database names go into SQL text (CREATE/DROP DATABASE take no parameters): only
/// `[a-z0-9_]` is accepted.
pub fn check_database_name(name: &str) -> Result<(), StoreError> {
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_') {
        return Err(StoreError::Corrupt(format!("refusing database name {name:?}")));
    }
    Ok(())
}

/// Creates database `name` if it does not exist (`admin` is connected to another database).
pub async fn ensure_database(admin: &Client, name: &str) -> Result<bool, StoreError> {
    check_database_name(name)?;
    if admin.query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&name]).await?.is_some() {
        return Ok(false);
    }
    admin.batch_execute(&format!("CREATE DATABASE {name}")).await?;
    Ok(true)
}
