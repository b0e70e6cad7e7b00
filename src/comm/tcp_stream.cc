// Blocking-with-deadline socket I/O: non-blocking system calls, and poll() for the waits, because
// Asio's synchronous calls wait without a timeout (they retry an SO_RCVTIMEO expiry in poll(-1)).
// Asio is used where it helps: name resolution and connecting.
#include "comm/tcp_stream.h"

#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <asio.hpp>
#include <climits>
#include <cstring>
#include <stdexcept>
#include <system_error>

#include "base/error.h"
#include "comm/tcp_congestion.h"

namespace dtrain {

namespace {

// iovecs per sendmsg: well under IOV_MAX, and a frame rarely has more pieces.
constexpr size_t kMaxIovecs = 64;

// Milliseconds until `limit`, rounded up so that poll never returns just before it; -1 for never.
int poll_timeout_ms(SteadyClock::time_point now, SteadyClock::time_point limit) {
  if (limit == SteadyClock::time_point::max()) return -1;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(limit - now).count();
  return static_cast<int>(std::clamp<int64_t>(ms, 0, INT_MAX));
}

SteadyClock::time_point stall_limit(const IoDeadline& deadline) {
  if (deadline.stall_ms < 0) return SteadyClock::time_point::max();
  return SteadyClock::now() + std::chrono::milliseconds(deadline.stall_ms);
}

}  // namespace

TcpStream::TcpStream(int fd, std::string address)
    : fd_(fd), address_(std::move(address)), peer_(address_) {
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags < 0 || ::fcntl(fd_, F_SETFL, flags | O_NONBLOCK) < 0) {
    const int error = errno;
    ::close(fd_);
    throw_errno("fcntl(O_NONBLOCK)", error);
  }
  const int one = 1;
  if (::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0) {
    const int error = errno;
    ::close(fd_);
    throw_errno("setsockopt(TCP_NODELAY)", error);
  }
}

TcpStream::~TcpStream() { ::close(fd_); }

std::unique_ptr<TcpStream> TcpStream::try_connect(const std::string& host, uint16_t port,
                                                  SteadyClock::time_point until,
                                                  std::string_view tcp_congestion,
                                                  std::string& error) {
  asio::io_context io;
  asio::ip::tcp::resolver resolver(io);
  std::error_code ec;
  const auto endpoints = resolver.resolve(host, std::to_string(port), ec);
  if (ec) {
    error = fmt::format("cannot resolve {}: {}", host, ec.message());
    return nullptr;
  }
  // Asio's synchronous connect has no timeout, so connect asynchronously and run the I/O context
  // only until the deadline. Each address is tried in turn, as asio::async_connect would, but by
  // hand: the congestion control must be set between opening the socket and connecting it.
  asio::ip::tcp::socket socket(io);
  std::error_code result = asio::error::host_not_found;
  for (const auto& entry : endpoints) {
    socket.close(ec);
    socket.open(entry.endpoint().protocol(), result);
    if (result) continue;
    if (const std::string why = apply_tcp_congestion(socket.native_handle(), tcp_congestion);
        !why.empty()) {
      throw TransportError(
          fmt::format("cannot connect to {}:{} with TCP congestion control '{}': {}", host, port,
                      tcp_congestion, why));
    }
    result = asio::error::timed_out;
    socket.async_connect(entry.endpoint(),
                         [&](const std::error_code& connect_ec) { result = connect_ec; });
    io.restart();
    io.run_until(until);
    if (!io.stopped()) {
      // The deadline passed first: cancel the attempt and let its handler run before `result` is
      // read, then report the timeout rather than the cancellation.
      socket.close(ec);
      io.restart();
      io.run();
      result = asio::error::timed_out;
      break;
    }
    if (!result) break;
  }
  if (result) {
    error = result.message();
    return nullptr;
  }
  // Errors name the peer as the caller did (a host name reads better than the address it resolved
  // to).
  const bool v6_literal = host.find(':') != std::string::npos;
  std::string address =
      v6_literal ? fmt::format("[{}]:{}", host, port) : fmt::format("{}:{}", host, port);
  return std::make_unique<TcpStream>(socket.release(), std::move(address));
}

void TcpStream::set_task_name(std::string_view task_name) {
  peer_ = task_name.empty() ? address_ : fmt::format("{} ({})", task_name, address_);
}

void TcpStream::set_liveness_timeout(int timeout_ms) {
  if (timeout_ms <= 0) throw std::invalid_argument("TcpStream: liveness timeout must be positive");
  // Probes start after a quarter of the timeout in silence, one a quarter apart; TCP_USER_TIMEOUT
  // then decides, counting from the last byte received, so the peer is declared lost between 1
  // and 1.25 times the timeout after it went silent, however many probes that took.
  const int probe_every_s = std::max(1, timeout_ms / 4000);
  const int one = 1, probes = 8;
  const unsigned user_timeout_ms = static_cast<unsigned>(timeout_ms);
  const struct {
    int level, name;
    const void* value;
    socklen_t size;
    const char* what;
  } options[] = {
      {SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one, "SO_KEEPALIVE"},
      {IPPROTO_TCP, TCP_KEEPIDLE, &probe_every_s, sizeof probe_every_s, "TCP_KEEPIDLE"},
      {IPPROTO_TCP, TCP_KEEPINTVL, &probe_every_s, sizeof probe_every_s, "TCP_KEEPINTVL"},
      {IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof probes, "TCP_KEEPCNT"},
      {IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof user_timeout_ms, "TCP_USER_TIMEOUT"},
  };
  for (const auto& option : options) {
    if (::setsockopt(fd_, option.level, option.name, option.value, option.size) < 0)
      throw_errno(fmt::format("setsockopt({})", option.what), errno);
  }
  liveness_timeout_ms_ = timeout_ms;
}

size_t TcpStream::read_some(std::span<std::byte> buf, const IoDeadline& deadline) {
  const auto stall_until = stall_limit(deadline);
  for (;;) {
    const ssize_t n = ::recv(fd_, buf.data(), buf.size(), 0);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) throw_errno("recv", errno);
    wait_ready(Direction::kRead, stall_until, deadline);
  }
}

void TcpStream::read_exact(std::span<std::byte> buf, const IoDeadline& deadline) {
  const size_t total = buf.size();
  while (!buf.empty()) {
    // Each read_some call restarts the stall clock: the stall bound is time without progress.
    const size_t n = read_some(buf, deadline);
    if (n == 0) {
      throw TransportError(
          fmt::format("{} closed the connection in the middle of a frame ({} of "
                      "{} bytes of a read received)",
                      peer_, total - buf.size(), total));
    }
    buf = buf.subspan(n);
  }
}

void TcpStream::write_all(std::span<const std::span<const std::byte>> pieces,
                          const IoDeadline& deadline) {
  size_t offset = 0;  // bytes of pieces.front() already written
  auto stall_until = stall_limit(deadline);
  for (;;) {
    while (!pieces.empty() && offset == pieces.front().size()) {
      pieces = pieces.subspan(1);
      offset = 0;
    }
    if (pieces.empty()) return;
    size_t written = write_available(pieces, offset);
    if (written == 0) {
      wait_ready(Direction::kWrite, stall_until, deadline);
      continue;
    }
    stall_until = stall_limit(deadline);
    // Advance over what was written, which may end inside any piece.
    while (written > 0) {
      const size_t step = std::min(written, pieces.front().size() - offset);
      offset += step;
      written -= step;
      if (offset == pieces.front().size()) {
        pieces = pieces.subspan(1);
        offset = 0;
      }
    }
  }
}

size_t TcpStream::read_available(std::span<std::byte> buf) {
  for (;;) {
    const ssize_t n = ::recv(fd_, buf.data(), buf.size(), MSG_DONTWAIT);
    if (n > 0) return static_cast<size_t>(n);
    if (n == 0) throw PeerClosed(fmt::format("{} closed the connection", peer_));
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    throw_errno("recv", errno);
  }
}

size_t TcpStream::write_available(std::span<const std::span<const std::byte>> pieces, size_t skip) {
  std::array<iovec, kMaxIovecs> iov;
  size_t count = 0;
  for (size_t i = 0; i < pieces.size() && count < kMaxIovecs; ++i) {
    const auto piece = i == 0 ? pieces[0].subspan(skip) : pieces[i];
    if (piece.empty()) continue;
    iov[count++] = {const_cast<std::byte*>(piece.data()), piece.size()};
  }
  if (count == 0) return 0;
  msghdr message{};
  message.msg_iov = iov.data();
  message.msg_iovlen = count;
  for (;;) {
    // MSG_NOSIGNAL: a peer that has gone away is an error to report, not a SIGPIPE.
    const ssize_t n = ::sendmsg(fd_, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    throw_errno("send", errno);
  }
}

void TcpStream::shutdown() { ::shutdown(fd_, SHUT_RDWR); }

void TcpStream::wait_ready(Direction direction, SteadyClock::time_point stall_until,
                           const IoDeadline& deadline) const {
  const bool reading = direction == Direction::kRead;
  for (;;) {
    const auto now = SteadyClock::now();
    if (now >= deadline.until) {
      throw TransportError(reading ? fmt::format("timed out waiting for data from {}", peer_)
                                   : fmt::format("timed out sending to {}", peer_));
    }
    if (now >= stall_until) {
      throw TransportError(
          reading
              ? fmt::format("timed out: no data from {} for {} ms", peer_, deadline.stall_ms)
              : fmt::format("timed out: {} accepted no data for {} ms", peer_, deadline.stall_ms));
    }
    pollfd entry{fd_, static_cast<short>(reading ? POLLIN : POLLOUT), 0};
    const int ready =
        ::poll(&entry, 1, poll_timeout_ms(now, std::min(deadline.until, stall_until)));
    // Readiness includes errors and hang-ups: the next recv/send reports them.
    if (ready > 0) return;
    if (ready < 0 && errno != EINTR) throw_errno("poll", errno);
  }
}

void TcpStream::throw_errno(std::string_view call, int error) const {
  if (error == ETIMEDOUT && liveness_timeout_ms_ > 0) {
    throw TransportError(fmt::format(
        "{} stopped answering: nothing acknowledged for {:.1f} s (the liveness timeout); its host "
        "is down or the network between us is cut",
        peer_, liveness_timeout_ms_ / 1000.0));
  }
  throw TransportError(fmt::format("{} on the connection to {} failed: {}", call, peer_,
                                   std::generic_category().message(error)));
}

}  // namespace dtrain
