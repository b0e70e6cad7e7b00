#!/usr/bin/env bash
# Runs one fuzz target over a fresh copy of its seed corpus: the ctest test of fuzz/tests.cmake.
# libFuzzer first runs every seed input (its INITED line), then mutates them for a time budget.
# Exits 0 when the budget runs out with no finding; non-zero when the target crashed, threw,
# leaked, hung on one input or ran out of memory, on a seed or on a mutation. Findings are kept in
# WORK_DIR/artifacts; WORK_DIR/corpus is remade at every run, so fuzz/corpus is never written to.
#
# Usage: fuzz/run_fuzzer.sh FUZZER SEED_DIR WORK_DIR
#   DTRAIN_FUZZ_SECONDS  the campaign's budget in seconds, 1 to 600 (default 5: the gate's short
#                        campaign; scripts/test.sh --full sets 600)
set -euo pipefail

if (($# != 3)); then
  echo "usage: $0 FUZZER SEED_DIR WORK_DIR" >&2
  exit 2
fi
fuzzer=$1
seeds=$2
work=$3
seconds=${DTRAIN_FUZZ_SECONDS:-5}

# ctest gives each fuzz test 660 s; a longer run is one to start by hand (docs/testing.md, "Fuzzing").
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || ((seconds < 1 || seconds > 600)); then
  echo "run_fuzzer: DTRAIN_FUZZ_SECONDS=$seconds must be 1 to 600; run $fuzzer by hand for longer" >&2
  exit 2
fi
if [[ ! -x "$fuzzer" ]]; then
  echo "run_fuzzer: $fuzzer is not built (scripts/setup.sh --sanitize builds build-fuzz)" >&2
  exit 2
fi

rm -rf "$work/corpus"
mkdir -p "$work/corpus" "$work/artifacts"
cp "$seeds"/* "$work/corpus/"
# -timeout: every target handles an input in milliseconds, so 10 s on one input is a hang.
# -rss_limit_mb (and the per-allocation limit it implies): ASan's quarantine alone holds a few
# hundred MB, and two targets may run at once beside the suite.
exec "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" "$work/corpus"
