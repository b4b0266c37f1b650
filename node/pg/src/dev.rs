//! Helpers for tests and tools on a development machine: start the local PostgreSQL through the
//! project's own script and make fresh, migrated databases. Nothing here runs in a node.

use crate::migrate::{ensure_database, migrate, Schema};
use crate::StoreError;
use std::sync::Mutex;

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

/// Runs `scripts/infra-up.sh COMPONENT` (`postgres`, `broker` or `all`) once per process and
/// component: installs and starts the server if needed. `Err` says why it could not be started.
pub fn start_infra(component: &str) -> Result<(), String> {
    static STARTED: Mutex<Vec<(String, Result<(), String>)>> = Mutex::new(Vec::new());
    let mut started = STARTED.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((_, result)) = started.iter().find(|(c, _)| c == component) {
        return result.clone();
    }
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/infra-up.sh");
    let result = std::process::Command::new("bash")
        .arg(&script)
        .arg(component)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))
        .and_then(|out| {
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "{} {component} failed ({}):\n{}",
                    script.display(),
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                ))
            }
        });
    started.push((component.to_string(), result.clone()));
    result
}

/// [`start_infra`]`("postgres")`.
pub fn start_postgres() -> Result<(), String> {
    start_infra("postgres")
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
    crate::migrate::check_database_name(name)?;
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await?;
    ensure_database(&admin, name).await?;
    let pool = crate::pool(&pg.host, pg.port, &pg.user, &pg.password, name, size)?;
    let mut client = pool.get().await?;
    migrate(&mut client, schema).await?;
    Ok(pool)
}
