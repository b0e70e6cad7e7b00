#!/usr/bin/env bash
# The README's second command: set up (packages, sanitizer and fuzz builds, MNIST, ONNX Runtime),
# then run the whole gate with ctest. Extra arguments go to ctest.
#
# Usage: scripts/test.sh [--release] [--full] [CTEST_ARGS...]
#   --release   run the suite on the plain Release build (build/) instead of build-asan
#   --full      the long campaigns as well: each fuzz target for 10 minutes instead of a short
#               campaign, and the soak test for 10 minutes instead of 20 s (about an hour in all);
#               DTRAIN_FUZZ_SECONDS and DTRAIN_SOAK_SECONDS, when set, still win
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

release=0
while [[ "${1:-}" == --release || "${1:-}" == --full ]]; do
  case "$1" in
    --release) release=1 ;;
    --full)
      export DTRAIN_FUZZ_SECONDS="${DTRAIN_FUZZ_SECONDS:-600}"
      export DTRAIN_SOAK_SECONDS="${DTRAIN_SOAK_SECONDS:-600}"
      ;;
  esac
  shift
done

if ((release)); then
  scripts/setup.sh --tests build
  build_dir=build
else
  scripts/setup.sh --sanitize
  build_dir=build-asan
fi
# Leaks fail the suite too. LeakSanitizer needs ptrace; where a container forbids it, run with
# ASAN_OPTIONS=detect_leaks=0 and ASan's other checks stay on.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# ctest runs two tests at once on two cores, and OpenMP's threads (oneDNN's) spin at every barrier
# while the other test holds the core they wait for: a gradient check of 4,000 oneDNN calls took
# 20 s that way instead of 0.1 s. Waiting threads sleep instead.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
cd "$build_dir"
exec ctest --output-on-failure -j 2 "$@"
