#!/usr/bin/env bash
# Runs the ps-lite anchor: a scheduler, P servers and W workers as processes of pslite_bench,
# wired together by ps-lite's DMLC_* environment, on 127.0.0.1 or across two network namespaces.
# Prints one line per size with every worker's median round and GB/s and their sum, the figures
# `dtrain bench ps` prints for the same sizes.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: bench/anchors/pslite/run.sh --ps P --workers W --model_bytes LIST [--secs S] [--fused]
                                   [--hosts NS_SERVER,NS_WORKER] [--bin PATH] [--timeout S]
  --ps P          ps-lite servers (each holds one equal part of the model)
  --workers W     ps-lite workers
  --model_bytes LIST  model sizes, e.g. 1MiB,16MiB
  --secs S        least seconds timed per size (default 3; at least 10 rounds too)
  --fused         one ZPushPull per round instead of a push then a pull
  --hosts NS_SERVER,NS_WORKER
                  run the scheduler and servers in network namespace NS_SERVER and the workers
                  in NS_WORKER, addressed by their eth0 addresses (e.g. dtb-h0,dtb-h1 from
                  bench/netns_hosts.sh up 2); needs root
  --bin PATH      the driver (default: build/anchors/pslite/pslite_bench, from build.sh)
  --timeout S     stop every process after S seconds (default: 60 + 30 per size + the timing)
EOF
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "$here/../../.." && pwd)
servers=
workers=
sizes=
secs=3
fused=()
hosts=
bin=$repo_root/build/anchors/pslite/pslite_bench
timeout_s=
while (($#)); do
  case "$1" in
    --ps) servers=${2:?--ps needs a value}; shift 2 ;;
    --workers) workers=${2:?--workers needs a value}; shift 2 ;;
    --model_bytes) sizes=${2:?--model_bytes needs a value}; shift 2 ;;
    --secs) secs=${2:?--secs needs a value}; shift 2 ;;
    --fused) fused=(--fused); shift ;;
    --hosts) hosts=${2:?--hosts needs a value}; shift 2 ;;
    --bin) bin=${2:?--bin needs a value}; shift 2 ;;
    --timeout) timeout_s=${2:?--timeout needs a value}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "run.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
if [[ ! "$servers" =~ ^[1-9][0-9]*$ || ! "$workers" =~ ^[1-9][0-9]*$ || -z "$sizes" ]]; then
  echo "run.sh: --ps, --workers (positive integers) and --model_bytes are required" >&2
  usage >&2
  exit 2
fi
if [[ ! "$secs" =~ ^[0-9]+([.][0-9]+)?$ ]]; then
  echo "run.sh: --secs '$secs': expected seconds" >&2
  exit 2
fi
if [[ ! -x "$bin" ]]; then
  echo "run.sh: $bin not built (run bench/anchors/pslite/build.sh, or pass --bin)" >&2
  exit 1
fi
IFS=, read -r -a size_list <<<"$sizes"
if [[ -z "$timeout_s" ]]; then
  timeout_s=$((60 + ${#size_list[@]} * (30 + ${secs%.*})))
fi

# Where each role runs: one namespace and address for the scheduler and servers, one for the
# workers. Without --hosts both are this namespace's loopback.
server_ns=
worker_ns=
server_host=127.0.0.1
worker_host=127.0.0.1
interface=lo
eth0_address() {
  ip -n "$1" -4 -o addr show dev eth0 2>/dev/null | awk '{ split($4, a, "/"); print a[1]; exit }'
}
if [[ -n "$hosts" ]]; then
  IFS=, read -r server_ns worker_ns <<<"$hosts"
  if [[ -z "$server_ns" || -z "$worker_ns" ]]; then
    echo "run.sh: --hosts '$hosts': expected NS_SERVER,NS_WORKER" >&2
    exit 2
  fi
  if ((EUID != 0)); then echo "run.sh: --hosts needs root (ip netns exec)" >&2; exit 1; fi
  for ns in "$server_ns" "$worker_ns"; do
    if [[ ! -e "/run/netns/$ns" ]]; then
      echo "run.sh: network namespace $ns does not exist (bench/netns_hosts.sh up 2 makes" \
        "dtb-h0 and dtb-h1)" >&2
      exit 1
    fi
  done
  server_host=$(eth0_address "$server_ns")
  worker_host=$(eth0_address "$worker_ns")
  if [[ -z "$server_host" || -z "$worker_host" ]]; then
    echo "run.sh: no IPv4 address on eth0 in $server_ns or $worker_ns" >&2
    exit 1
  fi
  interface=eth0
fi

# Runs "$@" in namespace $1, or here when $1 is empty.
in_ns() {
  local ns=$1
  shift
  if [[ -n "$ns" ]]; then ip netns exec "$ns" "$@"; else "$@"; fi
}

# The scheduler's port: one nobody holds in its namespace, below Linux's default ephemeral range
# (32768-60999) from which the servers and workers take theirs (ps-lite's GetAvailablePort).
free_port() {
  local ns=$1 port try
  for ((try = 0; try < 100; try++)); do
    port=$((20000 + RANDOM % 12000))
    if [[ -z "$(in_ns "$ns" ss -Htan "sport = :$port")" ]]; then
      echo "$port"
      return 0
    fi
  done
  echo "run.sh: found no free port in 20000-31999" >&2
  return 1
}
root_port=$(free_port "$server_ns")

# Kept at file scope so that the EXIT trap can stop every process still running and remove the
# logs, however the script ends.
declare -A role_of=()
live_pids=()
log_dir=$(mktemp -d)
cleanup() {
  if ((${#live_pids[@]})); then
    kill "${live_pids[@]}" 2>/dev/null || true
    wait "${live_pids[@]}" 2>/dev/null || true
  fi
  rm -rf "$log_dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# One process of role $1, named $2 (its log's name), in namespace $3 with node address $4.
# timeout bounds a process that waits forever for a peer that never came (ps-lite does).
# The command line is put together first and started as one simple command, so that $! is the
# process itself (ip netns exec, env and timeout each exec the next) and killing it reaches it.
launch() {
  local role=$1 name=$2 ns=$3 host=$4
  local command=(env DMLC_ROLE="$role" DMLC_NUM_SERVER="$servers" DMLC_NUM_WORKER="$workers"
    DMLC_PS_ROOT_URI="$server_host" DMLC_PS_ROOT_PORT="$root_port" DMLC_NODE_HOST="$host"
    DMLC_INTERFACE="$interface"
    timeout "$timeout_s" "$bin" --model_bytes "$sizes" --secs "$secs" "${fused[@]}")
  if [[ -n "$ns" ]]; then command=(ip netns exec "$ns" "${command[@]}"); fi
  "${command[@]}" >"$log_dir/$name.log" 2>&1 &
  live_pids+=($!)
  role_of[$!]=$name
}

# ZeroMQ's sockets run the host's default congestion control, as any program's that does not choose.
congestion=$(${server_ns:+ip netns exec "$server_ns"} cat /proc/sys/net/ipv4/tcp_congestion_control)
echo "pslite $servers x $workers: ps-lite $servers server(s), $workers worker(s), scheduler at" \
  "$server_host:$root_port, workers on $worker_host${hosts:+ (namespaces $server_ns, $worker_ns)}," \
  "${fused[*]:-push then pull} per round, sgd lr 1e-6, >= $secs s and >= 10 rounds per size," \
  "TCP congestion control $congestion (the host's default)"
launch scheduler scheduler "$server_ns" "$server_host"
for ((i = 0; i < servers; i++)); do launch server "server$i" "$server_ns" "$server_host"; done
for ((i = 0; i < workers; i++)); do launch worker "worker$i" "$worker_ns" "$worker_host"; done

# Reap every process; the first failure stops the rest, which would otherwise wait out the
# timeout for a peer that is gone.
failed=()   # processes that failed on their own
stopped=()  # processes this script stopped after the first failure
while ((${#live_pids[@]})); do
  finished=
  status=0
  wait -n -p finished "${live_pids[@]}" || status=$?
  if [[ -z "${finished:-}" ]]; then
    # "no such job": bash drops a finished process from its job table at times (here after the
    # kill below) and then wait -n refuses its pid, though plain wait still has its status.
    for pid in "${live_pids[@]}"; do
      if ! kill -0 "$pid" 2>/dev/null; then
        finished=$pid
        status=0
        wait "$pid" 2>/dev/null || status=$?
        break
      fi
    done
  fi
  if [[ -z "${finished:-}" ]]; then
    echo "run.sh: lost track of the ps-lite processes" >&2
    exit 1
  fi
  if ((${#failed[@]})); then
    stopped+=("${role_of[$finished]}")
  elif ((status != 0)); then
    why="exit $status"
    if ((status == 124)); then why+=", stopped by the $timeout_s s timeout"; fi
    failed+=("${role_of[$finished]} ($why)")
  fi
  still_running=()
  for pid in "${live_pids[@]}"; do
    if [[ "$pid" != "$finished" ]]; then still_running+=("$pid"); fi
  done
  live_pids=("${still_running[@]}")
  if ((${#failed[@]} && ${#live_pids[@]})); then kill "${live_pids[@]}" 2>/dev/null || true; fi
done

if ((${#failed[@]})); then
  echo "run.sh: failed: ${failed[*]}${stopped[*]:+; then stopped: ${stopped[*]}}" >&2
  for log in "$log_dir"/*.log; do
    if [[ -s "$log" ]]; then
      echo "--- $(basename "$log" .log) (last lines of its output)" >&2
      tail -n 12 "$log" >&2
    fi
  done
  exit 1
fi

# Each worker printed "pslite P x W worker R: SIZE median round MS ms, GBPS GB/s per worker (N
# rounds)"; one line per size with the workers' figures in rank order and their sum.
cat "$log_dir"/worker*.log | awk -v workers="$workers" -v expected_sizes="${#size_list[@]}" '
  match($0, /^pslite [0-9]+ x [0-9]+ worker [0-9]+: /) {
    split(substr($0, 1, RLENGTH - 2), head, " ")
    rank = head[6]; size = $7; ms[size, rank] = $10; gbps[size, rank] = $12
    if (!(size in seen)) { seen[size] = 1; order[++sizes] = size }
    count[size]++
    prefix = head[1] " " head[2] " " head[3] " " head[4]
  }
  END {
    if (sizes != expected_sizes) {
      printf "run.sh: the workers reported %d of %d sizes\n", sizes, expected_sizes > "/dev/stderr"
      exit 1
    }
    for (s = 1; s <= sizes; s++) {
      size = order[s]
      if (count[size] != workers) {
        printf "run.sh: %s: %d of %d workers reported\n", size, count[size], workers > "/dev/stderr"
        exit 1
      }
      ms_list = ""; gbps_list = ""; sum = 0
      for (r = 0; r < workers; r++) {
        ms_list = ms_list (r ? "/" : "") ms[size, r]
        gbps_list = gbps_list (r ? "/" : "") gbps[size, r]
        sum += gbps[size, r]
      }
      printf "%s: %s median round %s ms, %s GB/s per worker, %.3f GB/s total\n", prefix, size,
             ms_list, gbps_list, sum
    }
  }'
