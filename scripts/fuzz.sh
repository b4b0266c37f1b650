#!/usr/bin/env bash
# Runs the cargo fuzz targets (fuzz/): the journal codec and the pacs.008 parser, each for
# FUZZ_SECONDS (default 20; CI runs them briefly, longer by hand: FUZZ_SECONDS=600).
# Installs cargo-fuzz from crates.io if it is missing. A crash (panic or failed assertion) fails
# the script and leaves its input under fuzz/artifacts/<target>/.
#
# These machines have one (stable) Rust toolchain and cannot fetch nightly: RUSTC_BOOTSTRAP=1 lets
# the stable compiler take libFuzzer's instrumentation flags. No sanitizer: the code under test is
# safe Rust, so memory errors are the compiler's to exclude; the fuzzer looks for panics, failed
# assertions and hangs.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-20}"

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz: installing cargo-fuzz from crates.io (once, ~3 min)"
  cargo install cargo-fuzz --locked
fi
export RUSTC_BOOTSTRAP=1

# Seeds: a valid message and a valid frame, so that the fuzzers start from the accepted shapes.
mkdir -p fuzz/corpus/pacs008 fuzz/corpus/journal_codec
cp fuzz/seeds/pacs008/* fuzz/corpus/pacs008/ 2>/dev/null || true
cp fuzz/seeds/journal_codec/* fuzz/corpus/journal_codec/ 2>/dev/null || true

for target in journal_codec pacs008; do
  echo "== cargo fuzz run $target (${seconds} s)"
  log="fuzz/$target.log"
  if ! cargo fuzz run --sanitizer none "$target" "fuzz/corpus/$target" -- \
      -max_total_time="$seconds" -max_len=65536 -print_final_stats=1 >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "fuzz: $target FAILED; the crashing input is under fuzz/artifacts/$target/" >&2
    exit 1
  fi
  tail -n 6 "$log"
done
echo "fuzz: no crash in ${seconds} s per target"
