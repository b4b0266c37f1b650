#!/usr/bin/env bash
# What hosting the collection plugin costs the production engine's hot path: phase 1 of
# bench/cluster.sh (three `rtgs node`, `rtgs load` of TRANSFERS transfers finalized end to end)
# with the nodes started with or without --collection. RTGS_COLLECTION_WALLETS=0: no collection
# entries flow (no ticks either, RTGS_NO_IDLE_TICK), so this measures the plugin host's presence
# on the hot path (one match per entry) and the one initial plugin_state write.
#
#   bench/collection-overhead.sh true|false [TRANSFERS]     (default 500000)
set -euo pipefail
cd "$(dirname "$0")/.."
COL=$1; N=${2:-500000}
scripts/infra-up.sh all >/dev/null
cargo build --release -p rtgs --quiet
BIN=${CARGO_TARGET_DIR:-$PWD/target}/release/rtgs
P=pbench_$(date +%s)
DIR=$(mktemp -d /tmp/$P.XXXX)
pids=()
for c in 1 2 3; do
  CENTER_ID=$c CENTER_COUNT=3 RTGS_DB=${P}_dc$c RTGS_SEQ_DB=${P}_seq RTGS_TOPIC_PREFIX=$P \
    RTGS_STATUS_FILE=$DIR/dc$c.json RTGS_STATUS_INTERVAL_S=5 RTGS_NO_IDLE_TICK=true RTGS_METRICS_LISTEN=127.0.0.1:0 \
    RTGS_COLLECTION=$COL RTGS_COLLECTION_WALLETS=0 "$BIN" node >>"$DIR/dc$c.log" 2>&1 &
  pids+=($!)
done
trap 'kill ${pids[*]} 2>/dev/null || true' EXIT
field() { python3 -c "import json; print(json.load(open('$DIR/dc$1.json'))['$2'])" 2>/dev/null || echo 0; }
until [ "$(field 1 leader)" = True ] || [ "$(field 2 leader)" = True ] || [ "$(field 3 leader)" = True ]; do
  sleep 0.5
done
sleep 8   # let the group settle
"$BIN" load --topic-prefix "$P" --transfers "$N" --accounts 10000 --batch 2000 --timeout-s 600
"$BIN" reconcile --db-prefix "${P}_dc" | tail -1
