#!/usr/bin/env bash
# `dtrain bench allreduce --transport tcp` with each rank on a host of its own (a network namespace
# made by bench/netns_hosts.sh), so every chunk crosses two veth links and a bridge, as between
# machines, instead of loopback. The anchor beside it: scripts/compare_allreduce.sh --netns.
set -euo pipefail

usage() {
  cat <<'EOF2'
usage: bench/netns_allreduce.sh [--binary PATH] [--hosts NS0,NS1,...] [BENCH FLAGS...]
  --binary PATH   the dtrain binary (default: build/dtrain)
  --hosts LIST    one namespace per rank (default: dtb-h0,dtb-h1, from bench/netns_hosts.sh up 2)
  BENCH FLAGS     passed to every rank: --bytes, --chunk_bytes, --secs, --unauthenticated_frames…
Rank 0 prints the table. Needs root. Example:
  bench/netns_hosts.sh up 2 && bench/netns_allreduce.sh --bytes 1MiB,16MiB; bench/netns_hosts.sh down
EOF2
}

cd "$(dirname "${BASH_SOURCE[0]}")/.."
binary=build/dtrain
hosts_list=dtb-h0,dtb-h1
bench_flags=()
while (($#)); do
  case "$1" in
    --binary) binary=${2:?--binary needs a path}; shift 2 ;;
    --hosts) hosts_list=${2:?--hosts needs a list}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) bench_flags+=("$1"); shift ;;
  esac
done
IFS=, read -r -a namespaces <<<"$hosts_list"
ranks=${#namespaces[@]}
((ranks >= 2)) || { echo "netns_allreduce: --hosts needs at least two namespaces" >&2; exit 2; }
[[ -x "$binary" ]] || { echo "netns_allreduce: no binary at $binary (scripts/setup.sh builds it)" >&2; exit 1; }

# Each rank's address: its namespace's eth0 address, as bench/netns_hosts.sh gave it.
addresses=()
for ns in "${namespaces[@]}"; do
  addresses+=("$(bench/netns_hosts.sh eth0 "$ns")")
done
hosts_flag=$(IFS=,; echo "${addresses[*]}")
# One port per rank: each rank has a namespace, so the same port is free in each.
ports_flag=$(printf '29500%.0s,' $(seq "$ranks")); ports_flag=${ports_flag%,}

DTRAIN_SECRET=$(openssl rand -hex 32)
export DTRAIN_SECRET
pids=()
cleanup() {
  if ((${#pids[@]})); then
    kill "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
  fi
}
trap cleanup EXIT
for ((r = ranks - 1; r >= 0; r--)); do
  out=/dev/null
  ((r == 0)) && out=/dev/stdout
  ip netns exec "${namespaces[r]}" "$binary" bench allreduce --rank "$r" --ranks "$ranks" \
    --ports "$ports_flag" --hosts "$hosts_flag" --transport tcp "${bench_flags[@]}" >"$out" &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
pids=()
exit "$status"
