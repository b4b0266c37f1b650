//! Helpers for tests and tools on a development machine: start the local PostgreSQL through the
//! project's own script and make fresh, migrated databases. Nothing here runs in a node.

use crate::migrate::{ensure_database, migrate, Schema};
use crate::StoreError;
use std::sync::OnceLock;

/// Connection settings from `PGHOST`/`PGPORT`/`PGUSER`/`PGPASSWORD` (defaults: the local
/// server that `scripts/infra-up.sh` starts).
#[derive(Clone, Debug)]
pub struct PgSettings {
    pub host: String,
    pub port: u16,
    pub user: String,
    pub password: String,
}

impl PgSettings {
    pub fn from_env() -> Self {
        let var = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_string());
        PgSettings {
            host: var("PGHOST", "127.0.0.1"),
            port: var("PGPORT", "5432").parse().unwrap_or(5432),
            user: var("PGUSER", "postgres"),
            password: var("PGPASSWORD", "postgres"),
        }
    }
}

/// Runs `scripts/infra-up.sh postgres` once per process (installs and starts PostgreSQL if
/// needed). `Err` says why it could not be started.
pub fn start_postgres() -> Result<(), String> {
    static UP: OnceLock<Result<(), String>> = OnceLock::new();
    UP.get_or_init(|| {
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/infra-up.sh");
        let out = std::process::Command::new("bash")
            .arg(&script)
            .arg("postgres")
            .output()
            .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{} postgres failed ({}):\n{}",
                script.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    })
    .clone()
}

/// Drops and recreates database `name`, applies `schema`, and returns a pool of `size` on it.
pub async fn fresh_database(
    pg: &PgSettings,
    name: &str,
    schema: Schema,
    size: usize,
) -> Result<deadpool_postgres::Pool, StoreError> {
    let conn = format!(
        "host={} port={} user={} password={} dbname=postgres",
        pg.host, pg.port, pg.user, pg.password
    );
    let (admin, driver) = tokio_postgres::connect(&conn, tokio_postgres::NoTls).await?;
    tokio::spawn(driver);
    if !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_') {
        return Err(StoreError::Corrupt(format!("refusing database name {name:?}")));
    }
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await?;
    ensure_database(&admin, name).await?;
    let pool = crate::pool(&pg.host, pg.port, &pg.user, &pg.password, name, size)?;
    let mut client = pool.get().await?;
    migrate(&mut client, schema).await?;
    Ok(pool)
}
