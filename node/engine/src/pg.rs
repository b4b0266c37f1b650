//! The one PostgreSQL retry policy, and the databases' preparation at start.
//!
//! Every call that must ride out a PostgreSQL restart goes through [`PgRetry`]: a call that gets
//! no answer, or an answer that means "not now" (connection lost, server shutting down or
//! starting up, out of connections, a serialization failure), is repeated every
//! [`PG_RETRY_PAUSE`] until PostgreSQL answers; any other answer is final and returned. A write
//! whose commit may have happened before its connection was lost ([`PgRetry::write`]) is
//! settled by reading back before it is tried again — trying blindly would apply it twice or be
//! refused by its own first success.

use crate::error::EngineError;
use crate::limits::{PG_RETRY_PAUSE, PG_START_DEADLINE};
use rtgs_pg::StoreError;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio_postgres::error::SqlState;

/// Where PostgreSQL is.
#[derive(Clone, Debug)]
pub struct PgServer {
    pub host: String,
    pub port: u16,
    pub user: String,
    pub password: String,
}

impl PgServer {
    /// A pool of `size` connections to database `dbname`.
    pub fn pool(&self, dbname: &str, size: usize) -> Result<deadpool_postgres::Pool, StoreError> {
        rtgs_pg::pool(&self.host, self.port, &self.user, &self.password, dbname, size)
    }

    /// A `tokio_postgres::connect` string for database `dbname`.
    pub(crate) fn conn_string(&self, dbname: &str) -> String {
        format!(
            "host={} port={} user={} password={} dbname={dbname}",
            self.host, self.port, self.user, self.password
        )
    }

    /// `host:port`, for messages (never the password).
    pub fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// Whether `e` means "no answer (yet)": worth the same call again after a pause.
pub fn is_unavailable(e: &StoreError) -> bool {
    match e {
        StoreError::Pg(e) => pg_unavailable(e),
        StoreError::Pool(deadpool_postgres::PoolError::Backend(e)) => pg_unavailable(e),
        StoreError::Pool(
            deadpool_postgres::PoolError::Timeout(_) | deadpool_postgres::PoolError::PostCreateHook(_),
        ) => true,
        StoreError::Pool(_) | StoreError::Fenced { .. } | StoreError::OutOfOrder { .. } => false,
        StoreError::BmiSequenced { .. } => false,
        StoreError::Corrupt(_) => false,
    }
}

fn pg_unavailable(e: &tokio_postgres::Error) -> bool {
    let Some(code) = e.code() else {
        return true; // no answer at all: I/O, connection closed, refused
    };
    let class = &code.code()[..2];
    // 08 connection exception, 53 insufficient resources, 57 operator intervention (shutdown,
    // starting up, crash), 58 system error; and the two a retry is the documented cure for.
    matches!(class, "08" | "53" | "57" | "58")
        || *code == SqlState::T_R_SERIALIZATION_FAILURE
        || *code == SqlState::T_R_DEADLOCK_DETECTED
}

/// The retry policy (see the module docs); clones share the retry counter.
#[derive(Clone)]
pub struct PgRetry {
    who: Arc<str>,
    retries: Arc<AtomicU64>,
}

impl PgRetry {
    /// `who` names the node in messages; `retries` counts every call repeated (status, metrics).
    pub fn new(who: &str, retries: Arc<AtomicU64>) -> Self {
        PgRetry { who: who.into(), retries }
    }

    /// `op` until PostgreSQL answers; a final error is returned as it came (the sequencer
    /// matches `Fenced`).
    pub async fn call<T, F, Fut>(&self, what: &str, mut op: F) -> Result<T, StoreError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        let mut waited = false;
        loop {
            match op().await {
                Err(e) if is_unavailable(&e) => {
                    if !waited {
                        tracing::warn!(who = %self.who, "{what}: {e}; retrying until PostgreSQL answers");
                        waited = true;
                    }
                    self.retries.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(PG_RETRY_PAUSE).await;
                }
                other => {
                    if waited && other.is_ok() {
                        tracing::warn!(who = %self.who, "{what}: PostgreSQL answers again");
                    }
                    return other;
                }
            }
        }
    }

    /// [`PgRetry::call`], a final error turned into the engine's.
    pub async fn get<T, F, Fut>(&self, what: &str, op: F) -> Result<T, EngineError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        self.call(what, op).await.map_err(|e| EngineError::store(what, e))
    }

    /// A write whose outcome may be lost with its connection: after a failure without answer,
    /// `done` (retried like any call) says whether it happened anyway; only if not is it tried
    /// again. Returns the write's own answer if it was seen (`None`: settled by reading back).
    pub async fn write<T, W, WFut, D, DFut>(
        &self,
        what: &str,
        mut write: W,
        mut done: D,
    ) -> Result<Option<T>, StoreError>
    where
        W: FnMut() -> WFut,
        WFut: Future<Output = Result<T, StoreError>>,
        D: FnMut() -> DFut,
        DFut: Future<Output = Result<bool, StoreError>>,
    {
        loop {
            match write().await {
                Ok(answer) => return Ok(Some(answer)),
                Err(e) if is_unavailable(&e) => {
                    tracing::warn!(who = %self.who, "{what}: {e}; reading back whether it happened, then again");
                    self.retries.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(PG_RETRY_PAUSE).await;
                    if self.call(what, &mut done).await? {
                        return Ok(None);
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Creates database `db` if needed and applies `schema`'s migrations; PostgreSQL must answer
/// within [`PG_START_DEADLINE`] (three nodes may start together: a concurrent `CREATE
/// DATABASE` loses the race with "already exists", which the next attempt sees as done).
pub async fn prepare_database(
    server: &PgServer,
    db: &str,
    schema: rtgs_pg::migrate::Schema,
) -> Result<(), EngineError> {
    let deadline = Instant::now() + PG_START_DEADLINE;
    loop {
        match prepare_once(server, db, schema).await {
            Ok(()) => return Ok(()),
            Err(e) if Instant::now() < deadline && (is_unavailable(&e) || is_concurrent_create(&e)) => {
                tracing::warn!("database {db}: {e}; retrying");
                tokio::time::sleep(PG_RETRY_PAUSE * 2).await;
            }
            Err(e) if is_unavailable(&e) || is_concurrent_create(&e) => {
                return Err(EngineError::Unreachable {
                    what: format!("database {db} on {}", server.address()),
                    source: e,
                })
            }
            Err(e) => return Err(EngineError::store(format!("preparing database {db}"), e)),
        }
    }
}

/// A concurrent `CREATE DATABASE` (another node starting) answers with a unique violation: the
/// next attempt finds the database there.
fn is_concurrent_create(e: &StoreError) -> bool {
    matches!(e, StoreError::Pg(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION)
        || e.code() == Some(&SqlState::DUPLICATE_DATABASE))
}

async fn prepare_once(
    server: &PgServer,
    db: &str,
    schema: rtgs_pg::migrate::Schema,
) -> Result<(), StoreError> {
    let (admin, driver) =
        tokio_postgres::connect(&server.conn_string("postgres"), tokio_postgres::NoTls).await?;
    let driver = tokio::spawn(driver);
    let created = rtgs_pg::migrate::ensure_database(&admin, db).await;
    driver.abort();
    created?;
    let (mut client, driver) =
        tokio_postgres::connect(&server.conn_string(db), tokio_postgres::NoTls).await?;
    let driver = tokio::spawn(driver);
    let applied = rtgs_pg::migrate::migrate(&mut client, schema).await;
    driver.abort();
    applied.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// A call that got no answer (a pool that waited in vain).
    fn unanswered() -> StoreError {
        StoreError::Pool(deadpool_postgres::PoolError::Timeout(deadpool_postgres::TimeoutType::Wait))
    }

    fn retry() -> (PgRetry, Arc<AtomicU64>) {
        let retries = Arc::new(AtomicU64::new(0));
        (PgRetry::new("test", Arc::clone(&retries)), retries)
    }

    #[test]
    fn only_no_answer_is_retried() {
        assert!(is_unavailable(&unanswered()));
        for final_answer in [
            StoreError::Fenced { epoch: 2, seq_first: 9 },
            StoreError::OutOfOrder { seq_first: 9, seq_applied: 3 },
            StoreError::Corrupt("x".into()),
            StoreError::Pool(deadpool_postgres::PoolError::Closed),
        ] {
            assert!(!is_unavailable(&final_answer), "{final_answer}");
        }
    }

    #[tokio::test]
    async fn a_final_answer_is_returned_at_once() {
        let (r, retries) = retry();
        let calls = AtomicUsize::new(0);
        let got: Result<(), _> = r
            .call("record", || async {
                calls.fetch_add(1, Ordering::Relaxed);
                Err(StoreError::Fenced { epoch: 2, seq_first: 9 })
            })
            .await;
        assert!(matches!(got, Err(StoreError::Fenced { epoch: 2, seq_first: 9 })));
        assert_eq!((calls.into_inner(), retries.load(Ordering::Relaxed)), (1, 0));
    }

    #[tokio::test]
    async fn a_write_whose_answer_was_lost_is_settled_by_reading_back() {
        let (r, retries) = retry();
        let writes = AtomicUsize::new(0);
        // The write happened, but its answer was lost: reading back says so; no second write.
        let answered = r
            .write(
                "commit",
                || async {
                    writes.fetch_add(1, Ordering::Relaxed);
                    Err(unanswered())
                },
                || async { Ok(true) },
            )
            .await;
        assert_eq!(answered.ok(), Some(None::<()>), "settled by reading back");
        assert_eq!((writes.load(Ordering::Relaxed), retries.load(Ordering::Relaxed)), (1, 1));
        // It did not happen: written again, and this time answered.
        let answered = r
            .write(
                "commit",
                || async {
                    let n = writes.fetch_add(1, Ordering::Relaxed);
                    if n == 1 {
                        Err(unanswered())
                    } else {
                        Ok(())
                    }
                },
                || async { Ok(false) },
            )
            .await;
        assert_eq!(answered.ok(), Some(Some(())));
        assert_eq!((writes.load(Ordering::Relaxed), retries.load(Ordering::Relaxed)), (3, 2));
    }
}
