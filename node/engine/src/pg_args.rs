//! The PostgreSQL connection options shared by `node` and `reconcile`.

use clap::Args;

/// Where PostgreSQL is: flags or the usual `PG*` variables (defaults: the local server that
/// `scripts/infra-up.sh` starts).
#[derive(Args, Clone, Debug)]
pub struct PgArgs {
    #[arg(long, env = "PGHOST", default_value = "127.0.0.1")]
    pub pg_host: String,
    #[arg(long, env = "PGPORT", default_value_t = 5432)]
    pub pg_port: u16,
    #[arg(long, env = "PGUSER", default_value = "postgres")]
    pub pg_user: String,
    /// Password (prefer the PGPASSWORD environment variable).
    #[arg(long, env = "PGPASSWORD", default_value = "postgres", hide_env_values = true)]
    pub pg_password: String,
}

impl PgArgs {
    /// A pool of `size` connections to database `dbname`.
    pub fn pool(&self, dbname: &str, size: usize) -> Result<deadpool_postgres::Pool, rtgs_pg::StoreError> {
        rtgs_pg::pool(&self.pg_host, self.pg_port, &self.pg_user, &self.pg_password, dbname, size)
    }

    /// A `tokio_postgres::connect` string for database `dbname`.
    pub fn conn_string(&self, dbname: &str) -> String {
        format!(
            "host={} port={} user={} password={} dbname={dbname}",
            self.pg_host, self.pg_port, self.pg_user, self.pg_password
        )
    }

    /// `host:port`, for messages (never the password).
    pub fn server(&self) -> String {
        format!("{}:{}", self.pg_host, self.pg_port)
    }
}
