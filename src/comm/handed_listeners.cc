#include "comm/handed_listeners.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>
#include <utility>

namespace dtrain {
namespace {

std::mutex inherited_mutex;
int inherited = -1;  // guarded by inherited_mutex
bool inherited_read = false;

bool is_listening_socket(int fd) {
  int listening = 0;
  socklen_t length = sizeof listening;
  return getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &length) == 0 && listening == 1;
}

// The descriptor the launcher named, if it is a listening socket: a variable left behind in the
// environment of some other process names whatever that process has there, and is ignored.
void read_inherited() {
  if (inherited_read) return;
  inherited_read = true;
  const char* value = std::getenv(kListenFdVariable);
  if (value == nullptr) return;
  const std::string_view text(value);
  int fd = -1;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), fd);
  if (error != std::errc{} || end != text.data() + text.size() || fd < 0) return;
  if (!is_listening_socket(fd)) return;
  // Not passed on to what this process may start in turn.
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  inherited = fd;
}

uint16_t port_of(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in&>(address).sin_port);
  }
  if (address.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6&>(address).sin6_port);
  }
  return 0;
}

bool same_address(const sockaddr_storage& bound, const sockaddr* wanted, socklen_t length) {
  if (bound.ss_family != wanted->sa_family) return false;
  if (wanted->sa_family == AF_INET && length >= sizeof(sockaddr_in)) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(bound);
    const auto* b = reinterpret_cast<const sockaddr_in*>(wanted);
    return a.sin_port == b->sin_port && a.sin_addr.s_addr == b->sin_addr.s_addr;
  }
  if (wanted->sa_family == AF_INET6 && length >= sizeof(sockaddr_in6)) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(bound);
    const auto* b = reinterpret_cast<const sockaddr_in6*>(wanted);
    return a.sin6_port == b->sin6_port &&
           std::memcmp(&a.sin6_addr, &b->sin6_addr, sizeof a.sin6_addr) == 0;
  }
  return false;
}

uint16_t wanted_port(const sockaddr* wanted) {
  sockaddr_storage copy{};
  std::memcpy(&copy, wanted,
              wanted->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
  return port_of(copy);
}

}  // namespace

int take_handed_listener(const sockaddr* address, socklen_t length) {
  if (address->sa_family != AF_INET && address->sa_family != AF_INET6) return -1;
  const uint16_t port = wanted_port(address);
  if (port == 0) return -1;  // the kernel's pick: nothing was bound for it
  std::lock_guard lock(inherited_mutex);
  read_inherited();
  if (inherited < 0) return -1;
  sockaddr_storage bound{};
  socklen_t bound_length = sizeof bound;
  if (getsockname(inherited, reinterpret_cast<sockaddr*>(&bound), &bound_length) != 0 ||
      port_of(bound) != port) {
    return -1;
  }
  const int fd = std::exchange(inherited, -1);
  if (same_address(bound, address, length)) return fd;
  close(fd);
  return -1;
}

}  // namespace dtrain
