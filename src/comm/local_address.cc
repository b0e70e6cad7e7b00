// The kernel's route lookup, through a datagram socket: connect() on it only picks the source
// address for the destination, and getsockname() reads it back.
#include "comm/local_address.h"

#include <fmt/format.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace dtrain {

std::string local_address_toward(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  // Any port will do: nothing is sent.
  if (const int rc = ::getaddrinfo(host.c_str(), "9", &hints, &found); rc != 0) {
    throw TransportError(fmt::format("{}: does not resolve: {}", host, ::gai_strerror(rc)));
  }
  std::string why = "no address";
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_storage local{};
    socklen_t length = sizeof local;
    char text[NI_MAXHOST] = {};
    const bool ok = fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
                    ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0 &&
                    ::getnameinfo(reinterpret_cast<sockaddr*>(&local), length, text, sizeof text,
                                  nullptr, 0, NI_NUMERICHOST) == 0;
    if (!ok) why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    if (ok) {
      ::freeaddrinfo(found);
      return text;
    }
  }
  ::freeaddrinfo(found);
  throw TransportError(fmt::format("{}: no route from this host: {}", host, why));
}

std::string local_address_of(int fd) {
  sockaddr_storage local{};
  socklen_t length = sizeof local;
  char text[NI_MAXHOST] = {};
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) != 0 ||
      ::getnameinfo(reinterpret_cast<sockaddr*>(&local), length, text, sizeof text, nullptr, 0,
                    NI_NUMERICHOST) != 0) {
    throw TransportError(fmt::format("the local address of a socket: {}", std::strerror(errno)));
  }
  return text;
}

}  // namespace dtrain
