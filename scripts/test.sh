#!/usr/bin/env bash
# The whole test suite: unit, property, simulator, integration and CLI crash-drill tests, then
# the loom model check of the lock-free gap buffer. Needs only the Rust toolchain.
#
#   RTGS_SIM_SEEDS=N   simulator seeds run by `cargo test` (default: see node/core/src/sim)
#   RTGS_LOOM=0        skip the loom model check (it builds the core crate a second time)
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo test --workspace"
cargo test --workspace

if [ "${RTGS_LOOM:-1}" != "0" ]; then
  echo "== loom model check of the gap buffer (RUSTFLAGS=--cfg loom)"
  RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
    cargo test --release -p rtgs-core --lib gap_buffer::loom_tests
fi
