#!/usr/bin/env bash
# What --metrics_port costs when the real Prometheus server (Debian: prometheus) scrapes it every
# second: a local run's throughput with the endpoint on port 9400 against the same run without it,
# interleaved. dtrain runs on core 0 with one thread, Prometheus on core 1, so that the figure is
# what serving the page costs the training, not what Prometheus's own work takes from a machine
# that training fills (in a cluster, Prometheus runs elsewhere).
#
# Usage: bench/metrics_cost_prometheus.sh [DTRAIN] [ROUNDS]
set -euo pipefail
dtrain=${1:-build/dtrain}
rounds=${2:-5}
work=$(mktemp -d)
trap 'kill "$prometheus" 2>/dev/null; wait "$prometheus" 2>/dev/null; rm -rf "$work"' EXIT
cat > "$work/prometheus.yml" <<'YML'
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: dtrain
    static_configs:
      - targets: ['127.0.0.1:9400']
YML
taskset -c 1 prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address=127.0.0.1:0 > "$work/prometheus.log" 2>&1 &
prometheus=$!
run() {
  taskset -c 0 "$dtrain" train --model mlp --train_steps 30000 --log_every 0 --seed 7 --threads 1 "$@" 2>&1 |
    grep -o "[0-9.]* examples/sec" | tail -1 | cut -d' ' -f1
}
ratios=()
for round in $(seq "$rounds"); do
  without=$(run)
  with=$(run --metrics_port 9400)
  ratio=$(python3 -c "print(f'{$with / $without:.3f}')")
  ratios+=("$ratio")
  echo "round $round: $without examples/sec without, $with with Prometheus scraping every second: $ratio"
done
python3 -c "import statistics, sys; r = [float(x) for x in sys.argv[1:]]; print(f'median of {len(r)}: {statistics.median(r):.3f}x (min {min(r):.3f})')" "${ratios[@]}"
