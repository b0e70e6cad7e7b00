// Which TCP congestion control dtrain's sockets run (TCP_CONGESTION). It is set on a socket before
// it connects or listens, so that a connection never starts under another one: accepted
// connections inherit their listener's, and a socket switched after its handshake would keep the
// pacing its first algorithm turned on.
//
// Why dtrain picks one at all: its links are bulk transfers between a few peers with microsecond
// round trips. Under BBR without the fq qdisc, the kernel paces every 64 KiB segment with a timer
// of its own, which cost a third of the throughput over loopback here, and BBR's model settles, run
// by run, at either of two rates between network-namespace hosts (docs/benchmarks.md, "Between
// hosts"). Cubic, the Linux default, does neither.
#pragma once

#include <string>
#include <string_view>

namespace dtrain {

// cubic where the kernel lets this process set it on a socket, else the host's own: a process with
// CAP_NET_ADMIN (root's default) may set any algorithm the kernel has, one without it only those
// net.ipv4.tcp_allowed_congestion_control lists. So a root task runs cubic on a host whose allowed
// list leaves it out, and the same task run by another user runs the host's default there.
inline constexpr char kTcpCongestionAuto[] = "auto";
// The host's own (net.ipv4.tcp_congestion_control): nothing is set.
inline constexpr char kTcpCongestionHost[] = "host";

// Why `name` cannot be used here ("" when it can): auto and host always can; any other name only
// where the kernel accepts it on a TCP socket (tried on one), which for a process without
// CAP_NET_ADMIN means net.ipv4.tcp_allowed_congestion_control lists it. The reason lists those.
std::string tcp_congestion_refusal(std::string_view name);

// What the TCP socket `fd` runs, as the kernel reports it ("cubic"); "unknown" where it cannot
// tell.
std::string tcp_congestion_of(int fd);

// What a socket given `name` runs here, as the kernel reports it ("cubic"), for headers and logs;
// "unknown" where it cannot tell.
std::string tcp_congestion_in_use(std::string_view name);

// Sets `name` (as above) on `fd`, a TCP socket not yet connected or listening. Returns "" or, when
// the kernel refuses a name other than auto, why (errno's text); auto falls back to the host's
// own silently.
std::string apply_tcp_congestion(int fd, std::string_view name);

}  // namespace dtrain
