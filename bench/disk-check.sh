#!/usr/bin/env bash
# Is this machine's disk fit to measure latency on? Run it before trusting any fsync'd figure.
#
#   bench/disk-check.sh [DIR] [SYNCS]        (defaults: $TMPDIR or /tmp, where `rtgs demo` keeps
#                                            its journal; 8000)
#
# Times SYNCS `write` + `fdatasync` pairs of 1,200 bytes over zeros written before (as the
# journal writer does, bench/README "Zeros ahead") in a file under DIR, twice: with nothing else
# running, then beside one busy loop on one core (the other core stays free). Prints p50, p99,
# p999 and max, how many syncs took over 5 ms, and when the first of those came (ms since the
# start). A steady disk shows the same figures both times; on the machine of 2026-12-06 one sync
# every ~100 ms took 10-24 ms as soon as any core was busy (bench/README, "The machine of
# 2026-12-06"), whatever the guest's own scheduling: no fsync'd latency figure from such a
# machine says anything about the engine.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-${TMPDIR:-/tmp}}
SYNCS=${2:-8000}
mkdir -p "$DIR"
FILE=$(mktemp "$DIR/disk-check.XXXXXX")
BUSY=
cleanup() {
    [ -n "$BUSY" ] && kill "$BUSY" 2>/dev/null || true
    rm -f "$FILE"
}
trap cleanup EXIT

measure() {
    python3 - "$FILE" "$SYNCS" "$1" <<'EOF'
import os, sys, time
path, n, label = sys.argv[1], int(sys.argv[2]), sys.argv[3]
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
os.write(fd, b"\0" * (n * 1200 + (1 << 20)))
os.fsync(fd)
took, slow_at = [], []
t0 = time.perf_counter()
for i in range(n):
    os.pwrite(fd, b"x" * 1200, i * 1200)
    t = time.perf_counter()
    os.fdatasync(fd)
    d = time.perf_counter() - t
    took.append(d)
    if d > 0.005:
        slow_at.append(round((t - t0) * 1000))
os.close(fd)
took.sort()
us = lambda q: round(took[min(len(took) - 1, int(len(took) * q))] * 1e6)
print(f"{label:<24} p50 {us(0.5)} us, p99 {us(0.99)} us, p999 {us(0.999)} us, "
      f"max {round(took[-1] * 1e6)} us; over 5 ms: {len(slow_at)}"
      + (f" (at {', '.join(map(str, slow_at[:10]))} ms)" if slow_at else ""))
EOF
}

echo "fdatasync of 1,200 bytes over zeros, $SYNCS times, in $DIR:"
measure "alone"
bash -c 'while :; do :; done' &
BUSY=$!
measure "beside one busy core"
