#!/usr/bin/env bash
# Hosts of their own for benchmarks: N network namespaces dtb-h0..dtb-h{N-1} on one LAN, each
# linked by a veth pair to a Linux bridge in a switch namespace dtb-sw, so traffic between two
# hosts crosses two veth links and a bridge instead of loopback. The topology of
# tests/support/virtual_network.cc (names dtn<pid>-*, 10.77.0.0/24), under other names and on
# 10.78.0.0/24 so that both can exist at once.
set -euo pipefail

readonly kPrefix=dtb
readonly kSwitch=$kPrefix-sw
readonly kSubnet=10.78.0

usage() {
  cat <<'EOF'
usage: bench/netns_hosts.sh up N     make hosts dtb-h0..dtb-h{N-1} (10.78.0.1..N on eth0) and
                                     the switch dtb-sw; replaces any left from before
       bench/netns_hosts.sh down     delete every dtb-* namespace (nothing to delete is fine)
       bench/netns_hosts.sh addr I   print host I's address (10.78.0.<I+1>)
       bench/netns_hosts.sh eth0 NS  print the IPv4 address of namespace NS's eth0, or fail
                                     saying what is missing (for the scripts that use them)
Run a command on a host with: ip netns exec dtb-h0 COMMAND. Needs root and iproute2.
EOF
}

# The hosts' addresses are 10.78.0.1..254, so at most 254 hosts. REQUIRES: 0 <= $1 < 254.
address() { echo "$kSubnet.$(($1 + 1))"; }

# Every namespace this script may have made, the switch last: deleting a host namespace deletes
# its eth0 and with it the veth peer in the switch.
existing_namespaces() {
  local ns
  for ns in /run/netns/"$kPrefix"-h*; do
    if [[ -e "$ns" ]]; then basename "$ns"; fi
  done
  if [[ -e /run/netns/$kSwitch ]]; then echo "$kSwitch"; fi
}

# The address a namespace's eth0 has, whoever made it; fails naming what is missing.
eth0_address() {
  local ns=$1 found
  [[ -e /run/netns/$ns ]] || {
    echo "netns_hosts: network namespace $ns does not exist (bench/netns_hosts.sh up N)" >&2
    return 1
  }
  found=$(ip -n "$ns" -4 -o addr show dev eth0 | awk '{split($4, a, "/"); print a[1]; exit}')
  [[ -n "$found" ]] || { echo "netns_hosts: $ns has no IPv4 address on eth0" >&2; return 1; }
  echo "$found"
}

down() {
  local ns
  for ns in $(existing_namespaces); do ip netns del "$ns"; done
}

up() {
  local hosts=$1 i ns port
  down
  # A half-made network is worse than none: any failure below removes what was made.
  trap 'echo "netns_hosts: up failed; removing what was made" >&2; down' ERR
  ip netns add "$kSwitch"
  ip -n "$kSwitch" link add br0 type bridge
  ip -n "$kSwitch" link set br0 up
  for ((i = 0; i < hosts; i++)); do
    ns=$kPrefix-h$i
    port=h$i
    ip netns add "$ns"
    # Both ends are made inside the namespaces, so no link name is ever taken on this machine's
    # own namespace (where another host's eth0 could clash).
    ip -n "$kSwitch" link add "$port" type veth peer name eth0 netns "$ns"
    ip -n "$kSwitch" link set "$port" master br0 up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$(address "$i")/24" dev eth0
    ip -n "$ns" link set eth0 up
  done
  trap - ERR
  echo "netns_hosts: $hosts host(s) dtb-h0..dtb-h$((hosts - 1)) at $(address 0)..$(address $((hosts - 1)))" \
    "on bridge br0 in $kSwitch"
}

if (($# == 0)); then usage >&2; exit 2; fi
case "$1" in
  -h | --help) usage; exit 0 ;;
  addr)
    if (($# != 2)) || [[ ! "$2" =~ ^[0-9]+$ ]] || (($2 >= 254)); then usage >&2; exit 2; fi
    address "$2"
    exit 0
    ;;
  up)
    if (($# != 2)) || [[ ! "$2" =~ ^[1-9][0-9]*$ ]] || (($2 > 254)); then
      echo "netns_hosts: up N: N must be 1..254" >&2
      exit 2
    fi
    ;;
  down) if (($# != 1)); then usage >&2; exit 2; fi ;;
  eth0) if (($# != 2)); then usage >&2; exit 2; fi ;;
  *) usage >&2; exit 2 ;;
esac
if ((EUID != 0)); then echo "netns_hosts: needs root (network namespaces)" >&2; exit 1; fi
# A non-login root shell may leave the sbin folders, where ip lives, out of PATH.
PATH=$PATH:/usr/sbin:/sbin
if ! command -v ip >/dev/null; then
  echo "netns_hosts: ip not found (Debian package iproute2)" >&2
  exit 1
fi
case "$1" in
  up) up "$2" ;;
  eth0) eth0_address "$2" ;;
  *) down ;;
esac
