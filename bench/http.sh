#!/usr/bin/env bash
# The HTTP API's throughput on the embedded engine: builds the release binary, starts
# `rtgs serve` on a fresh data directory (the example config), then `rtgs http-load`:
# single signed transfers (closed loop, CONNECTIONS connections) and batches of 1,000.
#
#   bench/http.sh [SECONDS] [CONNECTIONS]      (defaults: 10 s, 96 connections)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-10}"
connections="${2:-96}"
cargo build --release -p rtgs --quiet
bin=target/release/rtgs
dir=$(mktemp -d /tmp/rtgs-bench-http.XXXXXX)
addr=127.0.0.1:18181
"$bin" serve --config node/api/participants.example.json --data-dir "$dir" --listen "$addr" 2>"$dir/serve.log" &
serve=$!
trap 'kill -TERM $serve 2>/dev/null; wait $serve 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 1 100); do
  grep -q "listening on" "$dir/serve.log" 2>/dev/null && break
  sleep 0.1
done
grep -q "listening on" "$dir/serve.log" || { cat "$dir/serve.log" >&2; exit 1; }
echo "== single transfers: $connections connections, $seconds s"
"$bin" http-load --addr "$addr" --duration-s "$seconds" --connections "$connections"
echo "== batches of 1,000 transfers: 32 connections, $seconds s"
"$bin" http-load --addr "$addr" --duration-s "$seconds" --connections 32 --batch 1000
