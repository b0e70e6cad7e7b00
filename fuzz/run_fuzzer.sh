#!/usr/bin/env bash
# Runs one fuzz target for a time budget over a fresh copy of its seed corpus: the ctest test of
# fuzz/tests.cmake. Exits 0 when the budget runs out with no finding; non-zero when the target
# crashed, threw, leaked, hung on one input or ran out of memory. Findings are kept in
# WORK_DIR/artifacts; WORK_DIR/corpus is remade at every run, so fuzz/corpus is never written to.
#
# Usage: fuzz/run_fuzzer.sh FUZZER SEED_DIR WORK_DIR
#   DTRAIN_FUZZ_SECONDS  the budget in seconds, 1 to 600 (default 60)
set -euo pipefail

if (($# != 3)); then
  echo "usage: $0 FUZZER SEED_DIR WORK_DIR" >&2
  exit 2
fi
fuzzer=$1
seeds=$2
work=$3
seconds=${DTRAIN_FUZZ_SECONDS:-60}

# ctest gives each fuzz test 660 s; a longer run is one to start by hand (README, "Fuzzing").
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
