#!/usr/bin/env bash
# Two dtrain builds side by side: the transports — `dtrain bench allreduce` (tcp and shm, 2 and 4
# ranks, 1/16/64 MiB) and `dtrain bench ps` (1 ps x 1 worker and 2 x 2, 16 MiB, tcp and shm) —
# and, with --train, whole training runs of MNIST's mlp under local, allreduce (2 workers), async
# and sync (1 ps, 2 workers), which go through the training loop and the strategies: their
# examples/sec as the closing line (local) or the chief's aggregate line says it. Each case runs
# ROUNDS times alternating the builds, so that both see the same machine. Prints every case's
# median for each build and the ratio NEW/BASE (above 1: the new build is faster).
#
# Usage: scripts/compare_builds.sh [--rounds N] [--secs S] [--train] [--no_transports]
#                                  BASE_DTRAIN NEW_DTRAIN
#   default: 3 rounds of at least 1 s per size; the training runs need MNIST (scripts/train.sh
#   fetches it)
set -euo pipefail

rounds=3
secs=1
train=0
transports=1
binaries=()
while (($#)); do
  case "$1" in
    --rounds) rounds=${2:?--rounds needs a value}; shift 2 ;;
    --secs) secs=${2:?--secs needs a value}; shift 2 ;;
    --train) train=1; shift ;;
    --no_transports) transports=0; shift ;;
    -h | --help) sed -n '2,13p' "$0"; exit 0 ;;
    -*) echo "compare_builds.sh: unknown option $1" >&2; exit 2 ;;
    *) binaries+=("$1"); shift ;;
  esac
done
if ((${#binaries[@]} != 2)); then
  echo "compare_builds.sh: give two dtrain binaries, BASE and NEW" >&2
  exit 2
fi
for binary in "${binaries[@]}"; do
  [[ -x $binary ]] || { echo "compare_builds.sh: $binary is not an executable" >&2; exit 2; }
done

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# One case of one build: appends its CSV rows to $out/<build>.csv.
run_case() {
  local build=$1 csv=$2
  shift 2
  "${binaries[$build]}" bench "$@" --secs "$secs" --csv "$csv" >/dev/null
}

# One training run of one build: appends "case,examples_per_sec" to $out/train_<build>.csv.
run_train() {
  local build=$1 name=$2
  shift 2
  local log rate
  log=$("${binaries[$build]}" train --model mlp --log_every 0 --seed 1 "$@" 2>&1) || {
    echo "compare_builds.sh: ${binaries[$build]} train $* failed:" >&2
    echo "$log" | tail -5 >&2
    exit 1
  }
  rate=$(echo "$log" | sed -nE 's/.*(aggregate: .* s, |Training elapsed time: .*steps, )([0-9.]+) examples\/sec.*/\2/p' | head -1)
  echo "$name,$rate" >>"$out/train_$build.csv"
}

cases=()
if ((transports)); then
  for transport in tcp shm; do
    for ranks in 2 4; do
      cases+=("allreduce --ranks $ranks --transport $transport --bytes 1MiB,16MiB,64MiB")
    done
    cases+=("ps --ps 1 --workers 1 --transport $transport --model_bytes 16MiB")
    cases+=("ps --ps 2 --workers 2 --transport $transport --model_bytes 16MiB")
  done
fi
trains=()
if ((train)); then
  trains+=("local --strategy local --train_steps 4000")
  trains+=("allreduce_2 --strategy allreduce --workers 2 --train_steps 2000")
  trains+=("async_1x2 --strategy async --ps 1 --workers 2 --train_steps 4000")
  trains+=("sync_1x2 --strategy sync --ps 1 --workers 2 --train_steps 2000")
fi

for ((round = 1; round <= rounds; ++round)); do
  # Alternate which build goes first, so that neither always meets the machine warmer.
  if ((round % 2)); then order=(0 1); else order=(1 0); fi
  for spec in "${cases[@]}"; do
    read -ra args <<<"$spec"
    for build in "${order[@]}"; do
      run_case "$build" "$out/${args[0]}_$build.csv" "${args[@]}"
    done
  done
  for spec in "${trains[@]}"; do
    read -ra args <<<"$spec"
    for build in "${order[@]}"; do
      run_train "$build" "${args[@]}"
    done
  done
  echo "round $round of $rounds done" >&2
done

python3 - "$out" <<'PY'
import csv, statistics, sys, pathlib
out = pathlib.Path(sys.argv[1])
def medians(kind, build, key, value):
    groups = {}
    path = out / f"{kind}_{build}.csv"
    if not path.exists():
        return groups
    for row in csv.DictReader(path.open()):
        if row[next(iter(row))] == next(iter(row)):
            continue  # a header repeated by a later run
        groups.setdefault(key(row), []).append(float(row[value]))
    return {k: statistics.median(v) for k, v in groups.items()}
specs = [
    ("allreduce", lambda r: f"allreduce {r['ranks']} ranks {r['transport']} {int(r['bytes']) >> 20} MiB",
     "busbw_gbps", "bus GB/s"),
    ("ps", lambda r: f"ps {r['ps']}x{r['workers']} {r['transport']} {int(r['model_bytes']) >> 20} MiB",
     "gbps_total", "GB/s total"),
]
def train_medians(build):
    groups = {}
    path = out / f"train_{build}.csv"
    if path.exists():
        for line in path.read_text().splitlines():
            case, _, rate = line.partition(",")
            if rate:
                groups.setdefault(case, []).append(float(rate))
    return {k: statistics.median(v) for k, v in groups.items()}
print(f"{'case':36} {'base':>9} {'new':>9} {'new/base':>9}  unit")
base, new = train_medians(0), train_medians(1)
for case in base:
    if case in new:
        print(f"{'train ' + case:36} {base[case]:9.0f} {new[case]:9.0f} {new[case] / base[case]:9.3f}  examples/sec")
for kind, key, value, unit in specs:
    base, new = medians(kind, 0, key, value), medians(kind, 1, key, value)
    for case in base:
        if case in new:
            print(f"{case:36} {base[case]:9.3f} {new[case]:9.3f} {new[case] / base[case]:9.3f}  {unit}")
PY
