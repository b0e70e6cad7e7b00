#include "support/forwarder.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

namespace dtrain::testing {
namespace {

sockaddr_in loopback(uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(port);
  return address;
}

// Writes all of data; false if the socket broke.
bool write_all(int fd, std::span<const std::byte> data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data = data.subspan(static_cast<size_t>(n));
  }
  return true;
}

// As TcpStream does for every connection: without it, a relayed stream of small frames (a ps's
// replies when the payloads go through memory) waits on delayed acknowledgements that the direct
// path never sees.
void no_delay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace

Forwarder::Forwarder(uint16_t target, std::function<std::unique_ptr<Filter>()> make_filter)
    : target_(target), make_filter_(std::move(make_filter)) {
  listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address = loopback(0);
  socklen_t length = sizeof address;
  if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      ::listen(listener_, 64) != 0 ||
      ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    if (listener_ >= 0) ::close(listener_);
    throw std::runtime_error("Forwarder: cannot listen on loopback");
  }
  port_ = ntohs(address.sin_port);
  acceptor_ = std::jthread([this](std::stop_token stop) { accept_loop(stop); });
}

Forwarder::~Forwarder() {
  acceptor_.request_stop();
  acceptor_.join();
  ::close(listener_);
}

void Forwarder::accept_loop(std::stop_token stop) {
  std::vector<std::jthread> pumps;
  while (!stop.stop_requested()) {
    pollfd fd{listener_, POLLIN, 0};
    // The slice bounds how late a stop is noticed.
    if (::poll(&fd, 1, 100) <= 0) continue;
    const int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    pumps.emplace_back([this, client, filter = make_filter_()](std::stop_token s) mutable {
      pump(client, std::move(filter), s);
    });
  }
  // Destroying pumps stops and joins each of them.
}

void Forwarder::pump(int client, std::unique_ptr<Filter> filter, std::stop_token stop) {
  const int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const sockaddr_in address = loopback(target_);
  if (server < 0 ||
      ::connect(server, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    if (server >= 0) ::close(server);
    ::close(client);
    return;
  }
  no_delay(client);
  no_delay(server);
  std::vector<std::byte> buffer(65536), out;
  bool open = true;
  while (open && !stop.stop_requested()) {
    pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
    if (::poll(fds, 2, 100) <= 0) continue;
    for (int i = 0; i < 2 && open; ++i) {
      if (fds[i].revents == 0) continue;
      const bool from_client = i == 0;
      const ssize_t n = ::recv(fds[i].fd, buffer.data(), buffer.size(), 0);
      if (n <= 0) {
        open = false;
        break;
      }
      const std::span<const std::byte> in(buffer.data(), static_cast<size_t>(n));
      out.clear();
      open = from_client ? filter->from_client(in, out) : filter->from_server(in, out);
      if (open) open = write_all(from_client ? server : client, out);
    }
  }
  ::close(server);
  ::close(client);
}

}  // namespace dtrain::testing
