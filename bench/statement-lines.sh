#!/usr/bin/env bash
# What storing statement lines with each commit costs PostgreSQL (issue 15, point 6): one
# connection writes commits of 4,096 transfers between 10,000 accounts — the entries alone (one
# applied_batch row per commit, center migration 0010), then with the two statement_line rows
# per transfer (`rtgs node --statement-history`) — alternating, ROUNDS times; entries/s of each.
# A scratch database, dropped at the end.
#
#   bench/statement-lines.sh [ROUNDS]      (default 3; PG* variables as for psql)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
export PGHOST=${PGHOST:-127.0.0.1} PGUSER=${PGUSER:-postgres} PGPASSWORD=${PGPASSWORD:-postgres}
DB=bench_statement_lines_$$
psql -X -q -d postgres -c "CREATE DATABASE $DB"
trap 'psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $DB"' EXIT
for f in migrations/center/*.sql; do psql -X -q -v ON_ERROR_STOP=1 -d "$DB" -f "$f" >/dev/null; done
psql -X -q -d "$DB" <<'SQL'
CREATE FUNCTION commit_batch(b int, lines bool) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO applied_batch
  SELECT b::bigint * 4096 + 1, b::bigint * 4096 + 4096, array_agg(1::bigint), array_agg(s),
         array_agg(1::smallint), array_agg('T' || s), array_agg(1::smallint),
         array_agg((s * 7919) % 10000), array_agg((s * 104729) % 10000), array_agg(100::bigint),
         array_agg('EUR'::text), array_agg(0::smallint), array_agg(s)
    FROM generate_series(b::bigint * 4096 + 1, b::bigint * 4096 + 4096) s;
  IF lines THEN
    INSERT INTO statement_line (account, seq, k, kind, counterparty, amount_minor, balance_after_minor)
    SELECT (s * 7919) % 10000, s, 0, 2, (s * 104729) % 10000, 100, s
      FROM generate_series(b::bigint * 4096 + 1, b::bigint * 4096 + 4096) s;
    INSERT INTO statement_line (account, seq, k, kind, counterparty, amount_minor, balance_after_minor)
    SELECT (s * 104729) % 10000, s, 1, 3, (s * 7919) % 10000, 100, s
      FROM generate_series(b::bigint * 4096 + 1, b::bigint * 4096 + 4096) s;
  END IF;
END $$;
SQL
run() { # lines: false | true
  psql -X -q -d "$DB" -c "TRUNCATE applied_batch, statement_line"
  local sql; sql=$(for i in $(seq 0 60); do echo "SELECT commit_batch($i, $1);"; done)
  local t0 t1; t0=$(date +%s.%N)
  psql -X -q -v ON_ERROR_STOP=1 -d "$DB" -c "$sql" >/dev/null
  t1=$(date +%s.%N)
  python3 -c "print('statement lines $1:', round(61 * 4096 / ($t1 - $t0)), 'entries/s')"
}
for _ in $(seq "$ROUNDS"); do run false; run true; done
