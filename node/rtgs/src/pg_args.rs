//! The PostgreSQL connection options shared by `node` and `reconcile`.

use clap::Args;
use rtgs_engine::PgServer;

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
    pub fn server(&self) -> PgServer {
        PgServer {
            host: self.pg_host.clone(),
            port: self.pg_port,
            user: self.pg_user.clone(),
            password: self.pg_password.clone(),
        }
    }
}
