#!/usr/bin/env bash
# The README's second command: set up (packages, sanitizer build, MNIST), then run the whole suite
# with ctest. --release runs it on the plain Release build instead.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [[ "${1:-}" == "--release" ]]; then
  shift
  scripts/setup.sh build
  build_dir=build
else
  scripts/setup.sh --sanitize
  build_dir=build-asan
fi
# Leaks fail the suite too. LeakSanitizer needs ptrace; where a container forbids it, run with
# ASAN_OPTIONS=detect_leaks=0 and ASan's other checks stay on.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
cd "$build_dir"
exec ctest --output-on-failure -j 2 "$@"
