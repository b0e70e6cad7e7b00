#!/usr/bin/env bash
# What TensorBoard summaries cost a training run: `dtrain train` with --logdir (default summaries:
# scalars every --log_every steps, histograms every 100 steps) and without, ROUNDS times each,
# interleaved so that both see the same machine, then the ratio of the median throughputs (the
# closing line's examples/sec, which times the steps) and of the median wall-clock seconds of the
# whole process (which also counts the loop's copies of the tensors between steps).
#
# Usage: scripts/compare_summaries.sh [--rounds N] [BUILD_DIR] [-- TRAIN_FLAGS...]
#   default: 5 rounds of `--train_steps 3000` of the default model, in build/
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds=5
build_dir=build
train_flags=(--train_steps 3000)
while (($#)); do
  case "$1" in
    --rounds) rounds=${2:?--rounds needs a value}; shift 2 ;;
    --) shift; train_flags=("$@"); break ;;
    -h | --help) sed -n '2,7p' "$0"; exit 0 ;;
    -*) echo "compare_summaries.sh: unknown option $1" >&2; exit 2 ;;
    *) build_dir=$1; shift ;;
  esac
done

logdir=$(mktemp -d)
trap 'rm -rf "$logdir"' EXIT

# "EXAMPLES_PER_SEC WALL_SECONDS" of one run.
measure() {
  local start end rate
  start=$(date +%s.%N)
  rate=$("$build_dir/dtrain" train --no_progress "${train_flags[@]}" "$@" |
    sed -nE 's/^Training elapsed time: .*, ([0-9.]+) examples\/sec\)$/\1/p')
  end=$(date +%s.%N)
  echo "$rate $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }')"
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

with=() without=() with_wall=() without_wall=()
for ((round = 1; round <= rounds; ++round)); do
  read -r rate wall < <(measure)
  without+=("$rate") without_wall+=("$wall")
  read -r rate wall < <(measure --logdir "$logdir/round$round")
  with+=("$rate") with_wall+=("$wall")
  echo "round $round: without ${without[-1]} examples/sec (${without_wall[-1]} s), with summaries" \
    "${with[-1]} (${with_wall[-1]} s)"
done
median_of() { printf '%s\n' "${!1}" | median; }
awk -v with="$(median_of 'with[@]')" -v without="$(median_of 'without[@]')" \
  -v with_wall="$(median_of 'with_wall[@]')" -v without_wall="$(median_of 'without_wall[@]')" \
  'BEGIN {
    printf "median examples/sec: without %.1f, with summaries %.1f: %.3fx\n", without, with, with / without
    printf "median wall seconds: without %.3f, with summaries %.3f: %.3fx the speed\n", without_wall,
      with_wall, without_wall / with_wall
  }'
