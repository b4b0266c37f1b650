#!/usr/bin/env bash
# Creates the databases of the production engine on the local PostgreSQL — rtgs_seq (the
# sequencer's state) and rtgs_dc1..rtgs_dc3 (one per center) — and applies migrations/ to them,
# forward-only: each file is applied once, in name order, in its own transaction, and recorded in
# schema_migrations. Safe to run again.
#
#   PGHOST/PGPORT/PGUSER/PGPASSWORD   default 127.0.0.1 / 5432 / postgres / postgres
#   RTGS_CENTER_COUNT                 default 3
#   RTGS_SEQ_DB, RTGS_DB_PREFIX       default rtgs_seq and rtgs_dc (databases rtgs_dc1..)
set -euo pipefail
cd "$(dirname "$0")/.."
export PGOPTIONS="${PGOPTIONS:--c client_min_messages=warning}" PGHOST=${PGHOST:-127.0.0.1} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres} PGPASSWORD=${PGPASSWORD:-postgres}
CENTERS=${RTGS_CENTER_COUNT:-3}
SEQ_DB=${RTGS_SEQ_DB:-rtgs_seq}
DB_PREFIX=${RTGS_DB_PREFIX:-rtgs_dc}
for db in "$SEQ_DB" "$DB_PREFIX"; do
  [[ $db =~ ^[a-z0-9_]+$ ]] || die "database name $db: only [a-z0-9_]"
done

die() { echo "init-3centers-db: error: $*" >&2; exit 1; }
psql_q() { psql -X -v ON_ERROR_STOP=1 -qAt "$@"; }

psql_q -d postgres -c 'SELECT 1' >/dev/null 2>&1 \
  || die "cannot connect to PostgreSQL at $PGHOST:$PGPORT as $PGUSER (run scripts/infra-up.sh first)"

migrate() { # database directory
  local db=$1 dir=$2 f version
  if [ -z "$(psql_q -d postgres -c "SELECT 1 FROM pg_database WHERE datname = '$db'")" ]; then
    psql_q -d postgres -c "CREATE DATABASE $db" || die "cannot create database $db"
    echo "init-3centers-db: created $db" >&2
  fi
  psql_q -d "$db" -c 'CREATE TABLE IF NOT EXISTS schema_migrations (
      version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())'
  for f in "$dir"/*.sql; do
    version=$(basename "$f" .sql)
    if [ -z "$(psql_q -d "$db" -c "SELECT 1 FROM schema_migrations WHERE version = '$version'")" ]; then
      { echo 'BEGIN;'; cat "$f"; echo "INSERT INTO schema_migrations (version) VALUES ('$version');"; echo 'COMMIT;'; } \
        | psql_q -d "$db" >/dev/null || die "migration $f failed on $db"
      echo "init-3centers-db: $db: applied $version" >&2
    fi
  done
}

migrate "$SEQ_DB" migrations/sequencer
for ((c = 1; c <= CENTERS; c++)); do
  migrate "$DB_PREFIX$c" migrations/center
done
echo "init-3centers-db: $SEQ_DB and ${DB_PREFIX}1..$DB_PREFIX$CENTERS are at the latest schema" >&2
