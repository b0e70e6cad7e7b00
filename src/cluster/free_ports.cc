#include "cluster/free_ports.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <string>

#include "base/error.h"

namespace dtrain {
namespace {

// Ports below this are where services listen by convention (databases, web servers, ...).
constexpr int kLowestPort = 16384;
// A band narrower than this is too easily exhausted by the tasks of concurrent runs.
constexpr int kNarrowestBand = 1024;
// Candidates tried per port before the kernel is asked for one.
constexpr int kTries = 64;

PortBand ephemeral_band() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0;
  int high = 0;
  if (!(in >> low >> high)) return {};
  return port_band_outside(low, high);
}

// A socket bound to 127.0.0.1:port (0: the kernel picks), or -1 if that port is taken. Sets
// `port` to the bound one. No SO_REUSEADDR: a port with connections in TIME_WAIT is passed over.
int bind_loopback(uint16_t& port) {
  const int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) throw IoError(fmt::format("launcher: socket: {}", std::strerror(errno)));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(port);
  socklen_t length = sizeof address;
  if (bind(s, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      getsockname(s, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    const int why = errno;
    close(s);
    if (port != 0 && why == EADDRINUSE) return -1;
    throw IoError(
        fmt::format("launcher: could not find a free loopback port: {}", std::strerror(why)));
  }
  port = ntohs(address.sin_port);
  return s;
}

}  // namespace

PortBand port_band_outside(int low, int high) {
  if (low - kLowestPort >= kNarrowestBand) return {kLowestPort, low - 1};
  const int first_above = std::max(high + 1, kLowestPort);
  if (65535 - first_above + 1 >= kNarrowestBand) return {first_above, 65535};
  return {};
}

std::vector<HeldPort> hold_free_ports(int n) {
  const PortBand band = ephemeral_band();
  std::mt19937 random(std::random_device{}());
  std::uniform_int_distribution<int> in_band(band.first, std::max(band.first, band.last));
  // Every socket stays bound until all are picked, so the ports are distinct.
  std::vector<HeldPort> held;
  try {
    for (int i = 0; i < n; ++i) {
      int s = -1;
      uint16_t port = 0;
      for (int t = 0; s < 0 && band.first <= band.last && t < kTries; ++t) {
        port = static_cast<uint16_t>(in_band(random));
        s = bind_loopback(port);
      }
      if (s < 0) {
        port = 0;
        s = bind_loopback(port);
      }
      held.push_back({port, s});
      // After the bind, which passed over ports in TIME_WAIT: the connections the task accepts
      // inherit the option, and only then do theirs in TIME_WAIT let the task bind its port
      // again (a restarted task, a ring formed anew).
      const int one = 1;
      if (setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
          listen(s, SOMAXCONN) != 0) {
        throw IoError(
            fmt::format("launcher: listen on 127.0.0.1:{}: {}", port, std::strerror(errno)));
      }
    }
  } catch (...) {
    for (const HeldPort& h : held) close(h.fd);
    throw;
  }
  return held;
}

std::vector<uint16_t> pick_free_ports(int n) {
  std::vector<uint16_t> ports;
  for (const HeldPort& h : hold_free_ports(n)) {
    ports.push_back(h.port);
    close(h.fd);
  }
  return ports;
}

}  // namespace dtrain
