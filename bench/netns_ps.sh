#!/usr/bin/env bash
# `dtrain bench ps --transport tcp` with the ps tasks on one host and the workers on another (network
# namespaces made by bench/netns_hosts.sh), so every push and pull crosses two veth links and a
# bridge, as between machines. The anchor beside it: bench/anchors/pslite/run.sh --hosts.
set -euo pipefail

usage() {
  cat <<'EOF2'
usage: bench/netns_ps.sh [--binary PATH] [--hosts PS_NS,WORKER_NS] --ps P --workers W
                         --model_bytes LIST [BENCH FLAGS...]
  --binary PATH   the dtrain binary (default: build/dtrain)
  --hosts         the ps tasks' namespace, then the workers' (default: dtb-h0,dtb-h1, from
                  bench/netns_hosts.sh up 2)
  BENCH FLAGS     passed to both halves: --secs, --max_shard_bytes, --unauthenticated_frames…
Each size runs on a fresh pair of processes; the workers' process prints the table's rows.
Needs root. Example:
  bench/netns_hosts.sh up 2 && bench/netns_ps.sh --ps 2 --workers 2 --model_bytes 1MiB,16MiB
EOF2
}

cd "$(dirname "${BASH_SOURCE[0]}")/.."
binary=build/dtrain
hosts_list=dtb-h0,dtb-h1
ps=1
workers=1
sizes=
bench_flags=()
while (($#)); do
  case "$1" in
    --binary) binary=${2:?--binary needs a path}; shift 2 ;;
    --hosts) hosts_list=${2:?--hosts needs a list}; shift 2 ;;
    --ps) ps=${2:?--ps needs a count}; shift 2 ;;
    --workers) workers=${2:?--workers needs a count}; shift 2 ;;
    --model_bytes) sizes=${2:?--model_bytes needs a list}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) bench_flags+=("$1"); shift ;;
  esac
done
[[ -n "$sizes" ]] || { usage >&2; exit 2; }
IFS=, read -r -a namespaces <<<"$hosts_list"
((${#namespaces[@]} == 2)) || { echo "netns_ps: --hosts takes two namespaces" >&2; exit 2; }
[[ -x "$binary" ]] || { echo "netns_ps: no binary at $binary (scripts/setup.sh builds it)" >&2; exit 1; }
ps_address=$(bench/netns_hosts.sh eth0 "${namespaces[0]}")
bench/netns_hosts.sh eth0 "${namespaces[1]}" >/dev/null
ports=$(seq -s, 29600 $((29600 + ps - 1)))

DTRAIN_SECRET=$(openssl rand -hex 32)
export DTRAIN_SECRET
ps_pid=
cleanup() {
  if [[ -n "$ps_pid" ]]; then
    kill "$ps_pid" 2>/dev/null || true
    wait "$ps_pid" 2>/dev/null || true
  fi
}
trap cleanup EXIT
common=(bench ps --ps "$ps" --workers "$workers" --transport tcp --host "$ps_address"
  --ports "$ports")
IFS=, read -r -a size_list <<<"$sizes"
first=1
for size in "${size_list[@]}"; do
  # The ps process says when it listens; the workers start only then.
  coproc PS { ip netns exec "${namespaces[0]}" "$binary" "${common[@]}" --role ps \
    --model_bytes "$size" "${bench_flags[@]}" 2>&1; }
  ps_pid=$PS_PID
  if ! read -r -t 30 ready <&"${PS[0]}" || [[ "$ready" != "ps tasks serving"* ]]; then
    echo "netns_ps: the ps process did not start: ${ready:-no output}" >&2
    exit 1
  fi
  rows=$(ip netns exec "${namespaces[1]}" "$binary" "${common[@]}" --role workers \
    --model_bytes "$size" "${bench_flags[@]}")
  if ((first)); then echo "$rows"; first=0; else echo "$rows" | tail -n 1; fi
  wait "$ps_pid"
  ps_pid=
done
