#!/usr/bin/env bash
# The whole test suite: unit, property, simulator, integration, CLI crash-drill and cluster
# tests (those that need PostgreSQL, the broker, prometheus, k6 or schemathesis start them
# through scripts/infra-up.sh), then the loom model check of the lock-free gap buffer, then a
# short run of the fuzz targets (scripts/fuzz.sh).
#
#   RTGS_SIM_SEEDS=N   simulator seeds run by `cargo test` (default: see node/sim/tests)
#   RTGS_LOOM=0        skip the loom model check (it builds the core crate a second time)
#   FUZZ_SECONDS=N     seconds per fuzz target (default 15); RTGS_FUZZ=0 skips fuzzing
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo test --workspace"
cargo test --workspace --no-fail-fast

if [ "${RTGS_LOOM:-1}" != "0" ]; then
  echo "== loom model check of the gap buffer (RUSTFLAGS=--cfg loom)"
  RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
    cargo test --release -p rtgs-core --lib gap_buffer::loom_tests
fi

if [ "${RTGS_FUZZ:-1}" != "0" ]; then
  echo "== fuzz targets, ${FUZZ_SECONDS:-15} s each"
  FUZZ_SECONDS="${FUZZ_SECONDS:-15}" scripts/fuzz.sh
fi
