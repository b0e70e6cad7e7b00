#include "support/cut_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>
#include <string>
#include <vector>

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
bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

CutProxy::CutProxy(uint16_t target, std::function<uint64_t()> next_cut)
    : target_(target), next_cut_(std::move(next_cut)) {
  listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address = loopback(0);
  socklen_t length = sizeof address;
  if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      ::listen(listener_, 64) != 0 ||
      ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    if (listener_ >= 0) ::close(listener_);
    throw std::runtime_error("CutProxy: cannot listen on loopback");
  }
  port_ = ntohs(address.sin_port);
  acceptor_ = std::jthread([this](std::stop_token stop) { accept_loop(stop); });
}

CutProxy::~CutProxy() {
  acceptor_.request_stop();
  acceptor_.join();
  ::close(listener_);
}

void CutProxy::accept_loop(std::stop_token stop) {
  std::vector<std::jthread> pumps;
  while (!stop.stop_requested()) {
    pollfd fd{listener_, POLLIN, 0};
    // The slice bounds how late a stop is noticed.
    if (::poll(&fd, 1, 100) <= 0) continue;
    const int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    const uint64_t cut_at = next_cut_ ? next_cut_() : 0;
    pumps.emplace_back([this, client, cut_at](std::stop_token s) { pump(client, cut_at, s); });
  }
  // Destroying pumps stops and joins each of them.
}

void CutProxy::pump(int client, uint64_t cut_at, std::stop_token stop) {
  const int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const sockaddr_in address = loopback(target_);
  if (server < 0 ||
      ::connect(server, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    if (server >= 0) ::close(server);
    ::close(client);
    return;
  }
  uint64_t returned = 0;
  char buffer[65536];
  bool open = true;
  while (open && !stop.stop_requested()) {
    pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
    if (::poll(fds, 2, 100) <= 0) continue;
    for (int i = 0; i < 2 && open; ++i) {
      if (fds[i].revents == 0) continue;
      const int from = fds[i].fd, to = i == 0 ? server : client;
      const ssize_t n = ::recv(from, buffer, sizeof buffer, 0);
      if (n <= 0) {
        open = false;
        break;
      }
      if (from == server && cut_at > 0 && returned + static_cast<uint64_t>(n) > cut_at) {
        ++cuts_;
        open = false;
        break;
      }
      if (from == server) returned += static_cast<uint64_t>(n);
      open = write_all(to, buffer, static_cast<size_t>(n));
    }
  }
  ::close(server);
  ::close(client);
}

}  // namespace dtrain::testing
