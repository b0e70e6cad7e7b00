#!/usr/bin/env bash
# Runs the optional Gloo and OpenMPI all-reduce benchmarks (bench/compare) on loopback for 2 and 4
# ranks, as reference figures for `dtrain bench allreduce`. Binaries that were not built are skipped.
# With --netns, Open MPI's two ranks run in two network namespaces instead (bench/netns_hosts.sh),
# so that their TCP traffic crosses veth links and a bridge rather than loopback.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/compare_allreduce.sh [BUILD_DIR] [--bytes LIST] [--ranks LIST] [--mpi LIST]
                                    [--iters K] [--no-gloo] [--netns NS0,NS1]
  BUILD_DIR     CMake build directory holding bench/compare (default: build)
  --bytes LIST  sizes to measure, e.g. 64K,1M,4M (K = KiB, M = MiB; default: 4K..64M)
  --ranks LIST  process counts, e.g. 2,4 (default: 2,4)
  --mpi LIST    Open MPI transports: tcp (loopback TCP, as Gloo), vader (its shared-memory
                transport, with single-copy CMA for large messages), or tcp,vader (default)
  --iters K     timed all-reduces per size (default: as many as take about 1.5 s)
  --no-gloo     skip Gloo
  --netns NS0,NS1
                run Open MPI's ranks in network namespaces NS0 and NS1 (e.g. dtb-h0,dtb-h1 from
                bench/netns_hosts.sh up 2), over the TCP BTL on their eth0; needs root, only
                --ranks 2 and --mpi tcp; Gloo is skipped
EOF
}

cd "$(dirname "${BASH_SOURCE[0]}")/.."
build_dir=build
bytes_args=()
iters_args=()
ranks_list=2,4
ranks_given=0
mpi_list=tcp,vader
mpi_given=0
want_gloo=1
netns_list=
while (($#)); do
  case "$1" in
    --bytes) bytes_args=(--bytes "${2:?--bytes needs a value}"); shift 2 ;;
    --bytes=*) bytes_args=(--bytes "${1#*=}"); shift ;;
    --ranks) ranks_list=${2:?--ranks needs a value}; ranks_given=1; shift 2 ;;
    --ranks=*) ranks_list=${1#*=}; ranks_given=1; shift ;;
    --mpi) mpi_list=${2:?--mpi needs a value}; mpi_given=1; shift 2 ;;
    --mpi=*) mpi_list=${1#*=}; mpi_given=1; shift ;;
    --iters) iters_args=(--iters "${2:?--iters needs a value}"); shift 2 ;;
    --iters=*) iters_args=(--iters "${1#*=}"); shift ;;
    --no-gloo) want_gloo=0; shift ;;
    --netns) netns_list=${2:?--netns needs a value}; shift 2 ;;
    --netns=*) netns_list=${1#*=}; shift ;;
    -h | --help) usage; exit 0 ;;
    -*) usage >&2; exit 2 ;;
    *) build_dir=$1; shift ;;
  esac
done
# --netns has its own defaults (2 ranks, TCP only) and refuses what it cannot do.
netns=()
if [[ -n "$netns_list" ]]; then
  IFS=, read -r -a netns <<<"$netns_list"
  if ((${#netns[@]} != 2)) || [[ -z "${netns[0]}" || -z "${netns[1]}" ]]; then
    echo "compare_allreduce: --netns $netns_list: give two namespaces, NS0,NS1" >&2
    exit 2
  fi
  if ((ranks_given)) && [[ "$ranks_list" != 2 ]]; then
    echo "compare_allreduce: --netns runs 2 ranks, one per namespace; --ranks $ranks_list" \
      "is not supported" >&2
    exit 2
  fi
  if ((mpi_given)) && [[ "$mpi_list" != tcp ]]; then
    echo "compare_allreduce: --netns measures the TCP BTL across namespaces; --mpi $mpi_list" \
      "is not supported (vader would go through shared memory)" >&2
    exit 2
  fi
  ranks_list=2
  mpi_list=tcp
fi
IFS=, read -r -a ranks_counts <<<"$ranks_list"
IFS=, read -r -a mpi_transports <<<"$mpi_list"
for transport in "${mpi_transports[@]}"; do
  case "$transport" in
    tcp | vader) ;;
    *) echo "compare_allreduce: --mpi $transport: choose tcp or vader" >&2; exit 2 ;;
  esac
done

gloo_bin="$build_dir/bench/compare/compare_gloo_allreduce"
mpi_bin="$build_dir/bench/compare/compare_mpi_allreduce"

# Kept at file scope so that an interrupt can still stop the ranks and remove the rendezvous dir.
live_pids=()
rendezvous_dir=
netns_dir=
cleanup() {
  if ((${#live_pids[@]})); then
    kill "${live_pids[@]}" 2>/dev/null || true
    wait "${live_pids[@]}" 2>/dev/null || true
  fi
  if [[ -n "$rendezvous_dir" ]]; then rm -rf "$rendezvous_dir"; fi
  if [[ -n "$netns_dir" ]]; then rm -rf "$netns_dir"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# One process per rank against a fresh FileStore directory. A rank that fails makes its peers
# wait out Gloo's timeout, so the rest are stopped at once instead.
run_gloo() {
  local ranks=$1 algorithm=$2 status=0 finished pid rank
  rendezvous_dir=$(mktemp -d)
  live_pids=()
  for ((rank = 0; rank < ranks; rank++)); do
    "$gloo_bin" --rank "$rank" --size "$ranks" --rendezvous "$rendezvous_dir" \
      --algorithm "$algorithm" "${bytes_args[@]}" "${iters_args[@]}" &
    live_pids+=($!)
  done
  while ((${#live_pids[@]})); do
    finished=
    if ! wait -n -p finished "${live_pids[@]}"; then
      if [[ -z "$finished" ]]; then  # wait itself failed: nothing left that it could reap.
        echo "compare_allreduce: lost track of the gloo ranks" >&2
        return 1
      fi
      if ((status == 0)); then
        echo "compare_allreduce: gloo $algorithm with $ranks ranks failed" >&2
      fi
      status=1
    fi
    local still_running=()
    for pid in "${live_pids[@]}"; do
      if [[ "$pid" != "$finished" ]]; then still_running+=("$pid"); fi
    done
    live_pids=("${still_running[@]}")
    if ((status != 0 && ${#live_pids[@]})); then kill "${live_pids[@]}" 2>/dev/null || true; fi
  done
  rm -rf "$rendezvous_dir"
  rendezvous_dir=
  return "$status"
}

# pml ob1 + btl tcp,self: really TCP over loopback (no UCX, no shared-memory vader), as Gloo does.
# btl vader,self: Open MPI's shared-memory transport, which copies large messages once with
# process_vm_readv (CMA), as `dtrain bench allreduce --transport shm` does.
run_mpi() {
  local ranks=$1 transport=$2
  local btl=(--mca btl tcp,self --mca btl_tcp_if_include lo)
  if [[ "$transport" == vader ]]; then btl=(--mca btl vader,self); fi
  if [[ "$transport" == tcp ]]; then
    echo "Open MPI, btl tcp (TCP congestion control $(</proc/sys/net/ipv4/tcp_congestion_control)," \
      "the host's default):"
  else
    echo "Open MPI, btl $transport:"
  fi
  mpirun --allow-run-as-root --oversubscribe -np "$ranks" --mca pml ob1 "${btl[@]}" \
    "$mpi_bin" "${bytes_args[@]}" "${iters_args[@]}"
}

# IPv4 address of eth0 in namespace $1, or nothing.
eth0_address() {
  ip -n "$1" -4 -o addr show dev eth0 2>/dev/null | awk '{ split($4, a, "/"); print a[1]; exit }'
}

# Bytes eth0 of namespace $1 has sent and received so far, "TX RX".
eth0_bytes() {
  ip netns exec "$1" cat /sys/class/net/eth0/statistics/tx_bytes \
    /sys/class/net/eth0/statistics/rx_bytes | paste -sd' '
}

# Refuses clearly, before anything starts, what would otherwise fail inside mpirun.
check_netns() {
  local ns
  if ((EUID != 0)); then echo "compare_allreduce: --netns needs root (ip netns exec)" >&2; exit 1; fi
  for ns in "${netns[@]}"; do
    if [[ ! -e "/run/netns/$ns" ]]; then
      echo "compare_allreduce: --netns: network namespace $ns does not exist (bench/netns_hosts.sh" \
        "up 2 makes dtb-h0 and dtb-h1)" >&2
      exit 1
    fi
    if [[ -z "$(eth0_address "$ns")" ]]; then
      echo "compare_allreduce: --netns: namespace $ns has no IPv4 address on eth0" >&2
      exit 1
    fi
  done
  if [[ ! -x "$mpi_bin" ]] || ! command -v mpirun >/dev/null; then
    echo "compare_allreduce: --netns: $mpi_bin or mpirun missing (MPI not installed?)" >&2
    exit 1
  fi
}

# Open MPI's two ranks in two network namespaces, over the TCP BTL on eth0.
#
# Not the MPMD form (mpirun -np 1 ip netns exec NS0 BIN : -np 1 ip netns exec NS1 BIN): a rank
# reaches its local PMIx server over TCP on 127.0.0.1 (PMIx 4, Debian 12's, has no Unix-socket
# transport: PMIX_SERVER_URI4=...;tcp4://127.0.0.1:PORT), and a rank moved into another namespace
# has a loopback of its own, so MPI_Init fails ("OPAL ERROR: Unreachable"). Instead each namespace
# is a node of its own, named by its eth0 address in a hostfile: mpirun runs in NS0 and starts
# rank 0 there; an rsh agent (in place of ssh) starts Open MPI's daemon, orted, in NS1, which
# reaches mpirun over eth0 (oob_tcp_if_include) and starts rank 1 beside it, where its PMIx
# server's loopback is its own.
run_mpi_netns() {
  local ns0=${netns[0]} ns1=${netns[1]} addr0 addr1 agent hostfile before after tx0 rx0 tx1 rx1
  addr0=$(eth0_address "$ns0")
  addr1=$(eth0_address "$ns1")
  netns_dir=$(mktemp -d)
  agent=$netns_dir/netns_agent
  hostfile=$netns_dir/hostfile
  # Called as "agent HOST COMMAND...", as ssh would be; COMMAND is a line for a shell (it holds
  # quoted words), run in the namespace whose address HOST is. The single-quoted $1 and $* are
  # the agent's own, expanded when it runs.
  # shellcheck disable=SC2016
  {
    echo '#!/usr/bin/env bash'
    echo 'set -euo pipefail'
    printf 'if [[ "$1" != %q ]]; then echo "netns_agent: unknown host $1" >&2; exit 1; fi\n' "$addr1"
    echo 'shift'
    printf 'exec ip netns exec %q /bin/sh -c "$*"\n' "$ns1"
  } >"$agent"
  chmod +x "$agent"
  printf '%s slots=1\n%s slots=1\n' "$addr0" "$addr1" >"$hostfile"

  echo "Open MPI, btl tcp, rank 0 in $ns0 ($addr0), rank 1 in $ns1 ($addr1), over eth0 (TCP" \
    "congestion control $(ip netns exec "$ns0" cat /proc/sys/net/ipv4/tcp_congestion_control)," \
    "the hosts' default):"
  before=$(eth0_bytes "$ns0")
  # --bind-to none: each namespace looks like a whole node to Open MPI, so both daemons would bind
  # their rank to the first core of this one machine; the two busy-polling ranks then share a core
  # and every step waits for a time slice (8 ms per 64 KiB all-reduce was seen).
  ip netns exec "$ns0" mpirun --allow-run-as-root --hostfile "$hostfile" -np 2 --map-by node \
    --bind-to none --mca plm_rsh_agent "$agent" --mca oob_tcp_if_include eth0 \
    --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include eth0 \
    "$(realpath "$mpi_bin")" "${bytes_args[@]}" "${iters_args[@]}"
  after=$(eth0_bytes "$ns0")
  read -r tx0 rx0 <<<"$before"
  read -r tx1 rx1 <<<"$after"
  echo "eth0 of $ns0 during the run: $((tx1 - tx0)) bytes sent, $((rx1 - rx0)) bytes received"
  rm -rf "$netns_dir"
  netns_dir=
}

if ((${#netns[@]})); then
  check_netns
  if ((want_gloo)); then echo "compare_allreduce: --netns runs Open MPI only; skipping Gloo" >&2; fi
  run_mpi_netns
  exit 0
fi

have_gloo=0
have_mpi=0
if ((!want_gloo)); then
  :
elif [[ -x "$gloo_bin" ]]; then
  have_gloo=1
else
  echo "compare_allreduce: $gloo_bin not built (Gloo missing?); skipping Gloo" >&2
fi
if [[ -x "$mpi_bin" ]] && command -v mpirun >/dev/null; then
  have_mpi=1
else
  echo "compare_allreduce: $mpi_bin or mpirun missing (MPI not installed?); skipping MPI" >&2
fi

for ranks in "${ranks_counts[@]}"; do
  if ((have_gloo)); then
    for algorithm in ring_chunked halving_doubling allreduce; do
      run_gloo "$ranks" "$algorithm"
    done
  fi
  if ((have_mpi)); then
    for transport in "${mpi_transports[@]}"; do run_mpi "$ranks" "$transport"; done
  fi
done
