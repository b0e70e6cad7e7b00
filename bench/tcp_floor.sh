#!/usr/bin/env bash
# What the kernel's TCP alone costs on this machine, as a floor under every TCP benchmark here:
# iperf3 (Debian's, a tool dtrain did not write) streams one way for a few seconds while this
# script reads the machine's busy CPU time from /proc/stat, so softirq work and both ends count,
# whichever process the kernel charges them to. From the CPU per MiB moved it prints the most a
# 2-rank all-reduce could reach if it did nothing but the kernel's copies, with and without frame
# tags (each rank tags every byte it sends and checks every byte it receives).
set -euo pipefail

usage() {
  cat <<'EOF2'
usage: bench/tcp_floor.sh [--hosts NS0,NS1] [--secs S] [--len BYTES] [--rounds N]
                          [--congestion NAME] [--gmac_gbps G] [--zerocopy]
  --hosts NS0,NS1   send from NS0 to NS1 (bench/netns_hosts.sh up 2); default: loopback
  --secs S          seconds per stream (default 4)
  --len BYTES       iperf3's write size, at most 1M (default 1M: the cheapest here)
  --rounds N        streams, one after another; the cheapest counts (default 3)
  --congestion NAME TCP congestion control of the stream (default cubic, as dtrain's links)
  --gmac_gbps G     GMAC bytes per second a core, in GB/s (default 42.7: ipsec-mb's AVX-512 GMAC
                    over 512 KiB on the 2-core machine, docs/benchmarks.md "Between hosts")
  --zerocopy        iperf3 -Z: the sender hands pages to the kernel (sendfile) instead of copying
Needs iperf3 (apt-get install iperf3); --hosts needs root. Example:
  bench/netns_hosts.sh up 2 && bench/tcp_floor.sh --hosts dtb-h0,dtb-h1; bench/netns_hosts.sh down
EOF2
}

secs=4 len=1M rounds=3 congestion=cubic gmac_gbps=42.7 hosts_list='' zerocopy=()
while (($#)); do
  case "$1" in
    --hosts) hosts_list=${2:?--hosts needs NS0,NS1}; shift 2 ;;
    --secs) secs=${2:?--secs needs a number}; shift 2 ;;
    --len) len=${2:?--len needs a size}; shift 2 ;;
    --rounds) rounds=${2:?--rounds needs a number}; shift 2 ;;
    --congestion) congestion=${2:?--congestion needs a name}; shift 2 ;;
    --gmac_gbps) gmac_gbps=${2:?--gmac_gbps needs a number}; shift 2 ;;
    --zerocopy) zerocopy=(-Z); shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "tcp_floor: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
done
command -v iperf3 >/dev/null || { echo "tcp_floor: needs iperf3 (apt-get install iperf3)" >&2; exit 1; }

server=() client=() address=127.0.0.1 where=loopback
if [[ -n "$hosts_list" ]]; then
  IFS=, read -r -a namespaces <<<"$hosts_list"
  ((${#namespaces[@]} == 2)) || { echo "tcp_floor: --hosts needs two namespaces" >&2; exit 2; }
  hosts_script=$(dirname "${BASH_SOURCE[0]}")/netns_hosts.sh
  address=$("$hosts_script" eth0 "${namespaces[1]}")
  "$hosts_script" eth0 "${namespaces[0]}" >/dev/null
  server=(ip netns exec "${namespaces[1]}") client=(ip netns exec "${namespaces[0]}")
  where="${namespaces[0]} to ${namespaces[1]} ($address)"
fi

port=5201
server_pid=
cleanup() {
  if [[ -n "$server_pid" ]]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
}
trap cleanup EXIT

# Busy and idle clock ticks of all cores since boot (user nice system irq softirq steal; idle iowait).
cpu_ticks() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6}' /proc/stat; }

cores=$(nproc)
hz=$(getconf CLK_TCK)
echo "kernel TCP floor, $where, $cores cores, iperf3 -l $len ${zerocopy[*]} -C $congestion, ${secs} s a stream"
best=
for ((round = 1; round <= rounds; round++)); do
  # -1: the server serves one client and exits, so each round starts a fresh one.
  "${server[@]}" iperf3 -s -1 -p "$port" >/dev/null 2>&1 &
  server_pid=$!
  # Wait for its listening socket rather than for a while.
  for ((try = 0; try < 100; try++)); do
    if "${server[@]}" ss -ltn "sport = :$port" | grep -q LISTEN; then break; fi
    sleep 0.05
  done
  read -r busy0 idle0 < <(cpu_ticks)
  report=$("${client[@]}" iperf3 -c "$address" -p "$port" -C "$congestion" -t "$secs" -l "$len" \
    "${zerocopy[@]}" -J)
  read -r busy1 idle1 < <(cpu_ticks)
  wait "$server_pid" || true
  server_pid=
  line=$(python3 - "$report" "$((busy1 - busy0))" "$((idle1 - idle0))" "$hz" <<'PY'
import json, sys
report, busy, idle, hz = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
received = report["end"]["sum_received"]
mib = received["bytes"] / 2**20
print(f'{received["bytes"] / received["seconds"] / 1e9:.2f} {busy / hz:.2f} {idle / hz:.2f} '
      f'{busy / hz / mib * 1e6:.0f}')
PY
  )
  read -r gbps busy idle us_per_mib <<<"$line"
  echo "  round $round: $gbps GB/s one way, cores busy $busy s, idle $idle s: $us_per_mib us of CPU per MiB moved"
  if [[ -z "$best" ]] || ((us_per_mib < best)); then best=$us_per_mib; fi
done

python3 - "$best" "$cores" "$gmac_gbps" <<'PY'
import sys
us_per_mib, cores, gmac = float(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]) * 1e9
per_byte = us_per_mib * 1e-6 / 2**20
# A 2-rank ring all-reduce of B bytes: each rank sends B and receives B (two halves each way), so
# the kernel moves 2B per collective; with tags each byte is tagged once and checked once: 4B of GMAC.
untagged = cores / (2 * per_byte) / 1e9
tagged = cores / (2 * per_byte + 4 / gmac) / 1e9
print(f"cheapest: {us_per_mib:.0f} us of CPU per MiB moved")
print(f"2-rank all-reduce on these {cores} cores, the kernel's copies alone: at most "
      f"{untagged:.2f} GB/s bus without tags, {tagged:.2f} with them (GMAC at {gmac / 1e9:g} GB/s a core);")
print(f"tags against none, with nothing else to do: {tagged / untagged:.2f}x")
PY
