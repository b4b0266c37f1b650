#!/usr/bin/env bash
# Runs the cargo fuzz targets (fuzz/): the journal codec and the pacs.008 parser, each for
# FUZZ_SECONDS (default 20; CI runs them briefly, longer by hand: FUZZ_SECONDS=600).
# Installs cargo-fuzz from crates.io if it is missing; needs the nightly toolchain (rustup).
# A crash fails the script and leaves its input under fuzz/artifacts/<target>/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-20}"

if ! rustup toolchain list | grep -q '^nightly'; then
  echo "fuzz: installing the nightly toolchain (libFuzzer needs -Z flags)"
  rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz: installing cargo-fuzz from crates.io (once, ~3 min)"
  cargo install cargo-fuzz --locked
fi

# Seeds: a valid message and a valid frame, so that the fuzzers start from the accepted shapes.
mkdir -p fuzz/corpus/pacs008 fuzz/corpus/journal_codec
cp fuzz/seeds/pacs008/* fuzz/corpus/pacs008/ 2>/dev/null || true
cp fuzz/seeds/journal_codec/* fuzz/corpus/journal_codec/ 2>/dev/null || true

for target in journal_codec pacs008; do
  echo "== cargo fuzz run $target (${seconds} s)"
  cargo +nightly fuzz run "$target" "fuzz/corpus/$target" -- \
    -max_total_time="$seconds" -max_len=65536 -print_final_stats=1 2>&1 | tail -n 12
  # `tail` hides the fuzzer's exit status: check it.
  if [ "${PIPESTATUS[0]}" != 0 ]; then
    echo "fuzz: $target FAILED; the crashing input is under fuzz/artifacts/$target/" >&2
    exit 1
  fi
done
echo "fuzz: no crash in ${seconds} s per target"
