#!/usr/bin/env bash
# Runs the optional Gloo and OpenMPI all-reduce benchmarks (bench/compare) on loopback for 2 and 4
# ranks, as reference figures for `dtrain bench allreduce`. Binaries that were not built are skipped.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/compare_allreduce.sh [BUILD_DIR] [--bytes LIST] [--ranks LIST] [--mpi LIST]
  BUILD_DIR     CMake build directory holding bench/compare (default: build)
  --bytes LIST  sizes to measure, e.g. 64K,1M,4M (K = KiB, M = MiB; default: 4K..64M)
  --ranks LIST  process counts, e.g. 2,4 (default: 2,4)
  --mpi LIST    Open MPI transports: tcp (loopback TCP, as Gloo), vader (its shared-memory
                transport, with single-copy CMA for large messages), or tcp,vader (default)
  --no-gloo     skip Gloo
EOF
}

cd "$(dirname "${BASH_SOURCE[0]}")/.."
build_dir=build
bytes_args=()
ranks_list=2,4
mpi_list=tcp,vader
want_gloo=1
while (($#)); do
  case "$1" in
    --bytes) bytes_args=(--bytes "${2:?--bytes needs a value}"); shift 2 ;;
    --bytes=*) bytes_args=(--bytes "${1#*=}"); shift ;;
    --ranks) ranks_list=${2:?--ranks needs a value}; shift 2 ;;
    --ranks=*) ranks_list=${1#*=}; shift ;;
    --mpi) mpi_list=${2:?--mpi needs a value}; shift 2 ;;
    --mpi=*) mpi_list=${1#*=}; shift ;;
    --no-gloo) want_gloo=0; shift ;;
    -h | --help) usage; exit 0 ;;
    -*) usage >&2; exit 2 ;;
    *) build_dir=$1; shift ;;
  esac
done
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
cleanup() {
  if ((${#live_pids[@]})); then
    kill "${live_pids[@]}" 2>/dev/null || true
    wait "${live_pids[@]}" 2>/dev/null || true
  fi
  if [[ -n "$rendezvous_dir" ]]; then rm -rf "$rendezvous_dir"; fi
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
      --algorithm "$algorithm" "${bytes_args[@]}" &
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
  echo "Open MPI, btl $transport:"
  mpirun --allow-run-as-root --oversubscribe -np "$ranks" --mca pml ob1 "${btl[@]}" \
    "$mpi_bin" "${bytes_args[@]}"
}

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
