#!/usr/bin/env bash
# The README's first command: set up (packages, the dtrain binary alone, MNIST), then train the
# default job (mnist_inference on MNIST). Extra arguments go to `dtrain train`. Without a
# --train_dir among them the run goes to a new folder, runs/train-<date>-<time>, so that a rerun
# neither resumes nor replaces an earlier one; at the end it says how to chart the run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh

args=("$@")
train_dir=""
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[i]}" in
    --train_dir) train_dir="${args[i + 1]:-}" ;;
    --train_dir=*) train_dir="${args[i]#--train_dir=}" ;;
  esac
done
if [[ -z "$train_dir" ]]; then
  base="runs/train-$(date +%Y%m%d-%H%M%S)"
  train_dir=$base
  for ((n = 2; ; n++)); do
    [[ -e "$train_dir" ]] || break
    train_dir="$base-$n"
  done
  args+=(--train_dir "$train_dir")
fi

status=0
build/dtrain train "${args[@]}" || status=$?
if [[ -f "$train_dir/metrics.jsonl" ]]; then
  echo "train: the run's checkpoints and metrics are in $train_dir; chart them with"
  printf '  build/dtrain plot %q\n' "$train_dir"
fi
exit "$status"
