// Choosing a socket's congestion control, and checking a name before any socket needs it.
#include "comm/tcp_congestion.h"

#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace dtrain {

namespace {

constexpr std::string_view kAutoChoice = "cubic";

std::string allowed_list() {
  std::ifstream in("/proc/sys/net/ipv4/tcp_allowed_congestion_control");
  std::string line;
  std::getline(in, line);
  return line.empty() ? "unknown" : line;
}

}  // namespace

std::string apply_tcp_congestion(int fd, std::string_view name) {
  if (name == kTcpCongestionHost) return "";
  const std::string_view choice = name == kTcpCongestionAuto ? kAutoChoice : name;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, choice.data(),
                   static_cast<socklen_t>(choice.size())) == 0 ||
      name == kTcpCongestionAuto) {
    return "";
  }
  switch (errno) {
    case ENOENT:
      return "the kernel has no such algorithm loaded";
    case EPERM:
      return "only a privileged process may choose one that "
             "net.ipv4.tcp_allowed_congestion_control does not list";
    default:
      return std::strerror(errno);
  }
}

std::string tcp_congestion_refusal(std::string_view name) {
  if (name == kTcpCongestionAuto || name == kTcpCongestionHost) return "";
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return fmt::format("cannot make a TCP socket to try it on: {}", std::strerror(errno));
  const std::string why = apply_tcp_congestion(fd, name);
  ::close(fd);
  if (why.empty()) return "";
  return fmt::format(
      "this host does not offer TCP congestion control '{}' to dtrain ({}); it allows: {}", name,
      why, allowed_list());
}

std::string tcp_congestion_of(int fd) {
  char buffer[64] = {};
  socklen_t length = sizeof buffer - 1;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, buffer, &length) != 0) return "unknown";
  return std::string(buffer, strnlen(buffer, length));
}

std::string tcp_congestion_in_use(std::string_view name) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "unknown";
  const std::string in_use =
      apply_tcp_congestion(fd, name).empty() ? tcp_congestion_of(fd) : "unknown";
  ::close(fd);
  return in_use;
}

}  // namespace dtrain
