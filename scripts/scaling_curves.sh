#!/usr/bin/env bash
# How cost grows: sweeps the benchmarks into CSV files and draws them with gnuplot (Debian's
# gnuplot-nox). Writes OUT_DIR/{allreduce,ps,memory}.csv and .png (default: docs/scaling).
#   all-reduce time against bytes (4 KiB to 256 MiB) for 2, 3, 4 and 6 ranks
#   ps round time against workers (1 to 8) for 1 to 4 ps tasks, 16 MiB model
#   peak resident memory of a ps task and of workers against model size (1M, 16M, 64M parameters)
set -euo pipefail

usage() {
  cat <<'EOF_USAGE'
usage: scripts/scaling_curves.sh [--build DIR] [--out DIR] [--only allreduce|ps|memory] [--plot-only]
  --build DIR   where build/dtrain is (default: build)
  --out DIR     where the CSV and PNG files go (default: docs/scaling)
  --only WHAT   run one sweep (default: all three)
  --plot-only   redraw the PNGs from the CSV files already there
EOF_USAGE
}

cd "$(dirname "${BASH_SOURCE[0]}")/.."
build_dir=build
out_dir=docs/scaling
only=
plot_only=0
while (($#)); do
  case "$1" in
    --build) build_dir=${2:?--build needs a directory}; shift 2 ;;
    --out) out_dir=${2:?--out needs a directory}; shift 2 ;;
    --only) only=${2:?--only needs allreduce, ps or memory}; shift 2 ;;
    --plot-only) plot_only=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done
case "$only" in
  '' | allreduce | ps | memory) ;;
  *) echo "scaling_curves: --only $only: choose allreduce, ps or memory" >&2; exit 2 ;;
esac
dtrain="$build_dir/dtrain"
if ((!plot_only)) && [[ ! -x "$dtrain" ]]; then
  echo "scaling_curves: $dtrain not built (run scripts/setup.sh)" >&2
  exit 1
fi
if ! command -v gnuplot >/dev/null; then
  echo "scaling_curves: gnuplot is not installed (apt-get install gnuplot-nox)" >&2
  exit 1
fi
mkdir -p "$out_dir"
wants() { [[ -z "$only" || "$only" == "$1" ]]; }

sweep_allreduce() {
  local csv="$out_dir/allreduce.csv" ranks
  rm -f "$csv"
  for ranks in 2 3 4 6; do
    echo "scaling_curves: all-reduce, $ranks ranks" >&2
    "$dtrain" bench allreduce --ranks "$ranks" --secs 0.5 --min_iters 3 --csv "$csv" \
      --bytes 4KiB,16KiB,64KiB,256KiB,1MiB,4MiB,16MiB,64MiB,256MiB >/dev/null
  done
}

sweep_ps() {
  local csv="$out_dir/ps.csv" ps workers
  rm -f "$csv"
  for ps in 1 2 3 4; do
    for workers in 1 2 3 4 5 6 7 8; do
      echo "scaling_curves: ps, $ps ps x $workers workers" >&2
      "$dtrain" bench ps --ps "$ps" --workers "$workers" --model_bytes 16MiB --secs 0.5 \
        --min_rounds 5 --csv "$csv" >/dev/null
    done
  done
}

# A Keras Sequential model of 784 -> units (relu) -> 10: 795 x units + 10 parameters.
write_model() {
  local units=$1 file=$2
  printf '{"class_name": "Sequential", "config": {"name": "scaling", "layers": [%s, %s, %s]}}\n' \
    '{"class_name": "InputLayer", "config": {"batch_input_shape": [null, 784]}}' \
    "{\"class_name\": \"Dense\", \"config\": {\"name\": \"hidden\", \"units\": $units, \"activation\": \"relu\"}}" \
    '{"class_name": "Dense", "config": {"name": "logits", "units": 10, "activation": "softmax"}}' \
    >"$file"
}

# The number after "peak resident memory " on the line that starts with $2, in MiB.
peak_of() { grep -F -- "$2" <<<"$1" | sed -n 's/.*peak resident memory \([0-9.]*\) MiB.*/\1/p' | head -1; }

sweep_memory() {
  local csv="$out_dir/memory.csv" models units params file out
  models=$(mktemp -d)
  trap 'rm -rf "$models"' RETURN
  echo "parameters,task,peak_rss_mib" >"$csv"
  for units in 1258 20126 80503; do
    params=$((795 * units + 10))
    file="$models/dense_$units.json"
    write_model "$units" "$file"
    echo "scaling_curves: memory, $params parameters" >&2
    out=$("$dtrain" train --strategy async --ps 1 --workers 1 --model "$file" --train_steps 3 \
      --log_every 0 2>&1)
    echo "$params,ps,$(peak_of "$out" "ps0: peak")" >>"$csv"
    echo "$params,ps_worker,$(peak_of "$out" "worker=0: peak")" >>"$csv"
    out=$("$dtrain" train --strategy allreduce --workers 2 --model "$file" --train_steps 3 \
      --log_every 0 2>&1)
    echo "$params,allreduce_worker,$(peak_of "$out" "worker=0: peak")" >>"$csv"
  done
  # One task's rows together, so that gnuplot draws each as one line.
  { head -1 "$csv"; tail -n +2 "$csv" | sort -t, -k2,2 -s; } >"$csv.sorted"
  mv "$csv.sorted" "$csv"
}

if ((!plot_only)); then
  if wants allreduce; then sweep_allreduce; fi
  if wants ps; then sweep_ps; fi
  if wants memory; then sweep_memory; fi
fi
have=()
for curve in allreduce ps memory; do
  if [[ -s "$out_dir/$curve.csv" ]]; then have+=("have_$curve=1;"); fi
done
gnuplot -e "dir='$out_dir'; ${have[*]}" scripts/scaling_curves.gp
echo "scaling_curves: wrote $out_dir/{allreduce,ps,memory}.{csv,png}" >&2
