#!/usr/bin/env bash
# Measures the production engine on this machine: three `rtgs node` processes, the broker and
# PostgreSQL together (issue 3's targets).
#
#   bench/cluster.sh [TRANSFERS] [CATCHUP_ENTRIES]     (defaults 1000000 and 1000000;
#                                                       TRANSFERS=0: the catch-up phase only)
#
# 1. throughput: `rtgs load` of TRANSFERS transfers, as fast as they go, finalized end to end
#    (every center persisting to PostgreSQL);
# 2. takeover: kill -9 of the sequencer leader, time until another center leads;
# 3. catch-up: DC3 stopped while CATCHUP_ENTRIES transfers are finalized by DC1+DC2, then
#    restarted: entries/s until it has applied and committed all of them.
# Ends with `rtgs reconcile`. Fresh databases and topics (prefix bench_<time>) every run.
# RTGS_BIN=path runs that binary instead of building target/release/rtgs (before/after runs).
# LOAD_ARGS: more arguments of the measured `rtgs load` runs (default: `--fetch-wait-ms 100`,
# so that the generator's notice reader does not poll the broker the nodes share every 10 ms;
# empty for a binary without that flag).
# Every run has a broker of its own, fresh (tansu on BENCH_BROKER_PORT, default 9093, its sqlite
# file in the run's directory), stopped and deleted at the end with the run's four databases:
# the shared broker's file only grows (3 GB after a day of runs here cut phase 1 from 58,000 to
# 36,000/s), and old bench databases keep autovacuum busy during the next run. KEEP=1 keeps
# both (and the logs) to be read — and leaves that broker running: the next run refuses its
# port until it is stopped (the command is printed).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000000}
LOAD_ARGS=${LOAD_ARGS---fetch-wait-ms 100}
CATCHUP=${2:-1000000}
scripts/infra-up.sh all
BROKER_PORT=${BENCH_BROKER_PORT:-9093}
if [ -z "${RTGS_BIN:-}" ]; then
  cargo build --release -p rtgs --quiet
  RTGS_BIN=$PWD/target/release/rtgs
fi
BIN=$RTGS_BIN
P=bench_$(date +%s)
DIR=$(mktemp -d /tmp/$P.XXXX)
echo "bench/cluster.sh: prefix $P, logs in $DIR" >&2
start() { # center
  CENTER_ID=$1 CENTER_COUNT=3 RTGS_DB=${P}_dc$1 RTGS_SEQ_DB=${P}_seq RTGS_TOPIC_PREFIX=$P \
    RTGS_STATUS_FILE=$DIR/dc$1.json RTGS_STATUS_INTERVAL_S=5 RTGS_NO_IDLE_TICK=true RTGS_METRICS_LISTEN=127.0.0.1:0 \
    "$BIN" node >>"$DIR/dc$1.log" 2>&1 &
  echo $! >"$DIR/dc$1.pid"
}
calc() { python3 -c "print(round($1, 2))"; }
field() { python3 -c "import json,sys; print(json.load(open('$DIR/dc$1.json'))['$2'])" 2>/dev/null || echo 0; }
leader() { for c in 1 2 3; do [ "$(field $c leader)" = True ] && { echo $c; return; }; done; echo 0; }
broker() { RTGS_INFRA_DIR=$DIR/broker RTGS_BROKER_PORT=$BROKER_PORT scripts/"$1".sh broker; }
cleanup() {
  local rc=$?
  for c in 1 2 3; do [ -f "$DIR/dc$c.pid" ] && kill "$(cat "$DIR/dc$c.pid")" 2>/dev/null || true; done
  [ "${KEEP:-}" = 1 ] && { echo "bench/cluster.sh: kept $DIR, databases ${P}_*, broker on $BROKER_PORT" \
    "(stop it: RTGS_INFRA_DIR=$DIR/broker RTGS_BROKER_PORT=$BROKER_PORT scripts/infra-down.sh broker)" >&2; return; }
  broker infra-down 2>/dev/null || true
  # A failed run keeps its logs, databases and the broker's file to be read.
  [ "$rc" = 0 ] || { echo "bench/cluster.sh: failed; kept $DIR and databases ${P}_*" >&2; return; }
  for db in dc1 dc2 dc3 seq; do
    PGPASSWORD=${PGPASSWORD:-postgres} psql -X -q -h 127.0.0.1 -U postgres -d postgres \
      -c "DROP DATABASE IF EXISTS ${P}_$db WITH (FORCE)" >/dev/null 2>&1 || true
  done
  rm -rf "$DIR"
}
# The broker must be this run's own: a broker already on the port (a KEEP=1 run's, still
# running) would be taken as ours by infra-up and measured with the earlier runs' data in it
# (phase 1 fell from ~72,000 to ~37,000/s that way).
if (exec 3<>"/dev/tcp/127.0.0.1/$BROKER_PORT") 2>/dev/null; then
  echo "bench/cluster.sh: port $BROKER_PORT is taken (a kept run's broker? stop it with" \
    "RTGS_INFRA_DIR=/tmp/bench_…/broker RTGS_BROKER_PORT=$BROKER_PORT scripts/infra-down.sh broker)," \
    "or set BENCH_BROKER_PORT to a free port" >&2
  rm -rf "$DIR"; exit 1
fi
trap cleanup EXIT
mkdir -p "$DIR/broker"; broker infra-up >/dev/null
export RTGS_BOOTSTRAP=127.0.0.1:$BROKER_PORT
for c in 1 2 3; do start $c; done
until [ "$(leader)" != 0 ]; do sleep 0.5; done; sleep 2   # let the leadership settle
if [ "$N" = 0 ]; then   # catch-up only: the accounts still need opening and funding
  "$BIN" load --topic-prefix "$P" --transfers 1 --accounts 10000 --timeout-s 600 >/dev/null
else
echo "== throughput: $N transfers" >&2
"$BIN" load --topic-prefix "$P" --transfers "$N" --accounts 10000 --batch 2000 --timeout-s 600 $LOAD_ARGS

echo "== takeover: kill -9 of the sequencer leader" >&2
L=$(leader); E=$(field "$L" epoch)
kill -9 "$(cat "$DIR/dc$L.pid")"; rm -f "$DIR/dc$L.json"; T0=$(date +%s.%N)
while :; do
  for c in 1 2 3; do
    [ "$c" = "$L" ] && continue
    if [ "$(field $c leader)" = True ] && [ "$(field $c epoch)" -gt "$E" ]; then
      echo "takeover: DC$c leads (epoch $(field $c epoch)) $(calc "$(date +%s.%N) - $T0") s after kill -9 of DC$L"
      break 2
    fi
  done
  sleep 0.05
done
start "$L"; sleep 5
fi

echo "== catch-up: DC3 down for $CATCHUP entries" >&2
kill "$(cat "$DIR/dc3.pid")"; sleep 1; rm -f "$DIR/dc3.json"
until [ "$(leader)" != 0 ] && [ "$(leader)" != 3 ]; do sleep 0.5; done
"$BIN" load --topic-prefix "$P" --transfers "$CATCHUP" --accounts 10000 --skip-setup --batch 2000 $LOAD_ARGS \
  --origins 1,2 --timeout-s 600 --run-id C$P
TARGET=$(field 1 seq_committed)
T0=$(date +%s.%N); start 3
until [ -f "$DIR/dc3.json" ]; do sleep 0.01; done   # its state is loaded: it starts reading
T1=$(date +%s.%N); BEHIND=$((TARGET - $(field 3 seq_committed)))
while [ "$(field 3 seq_committed)" -lt "$TARGET" ]; do sleep 0.05; done
T2=$(date +%s.%N)
echo "catch-up: DC3 was $BEHIND entries behind when it had started ($(calc "$T1 - $T0") s after launch);"\
  "applied and committed them in $(calc "$T2 - $T1") s: $(calc "$BEHIND / ($T2 - $T1)") entries/s"\
  "($(calc "$CATCHUP / ($T2 - $T0)")/s counting the process start)"
sleep 2
"$BIN" reconcile --db-prefix "${P}_dc"
