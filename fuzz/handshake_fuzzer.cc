// libFuzzer target for the connection handshake (comm/auth.h, comm/connection.h): a real
// Connection runs handshake_as_server or handshake_as_client over a loopback TCP connection whose
// other end has already sent the input and shut its side down. The parsing of HELLO, CHALLENGE,
// PROOF and AUTH_FAILED frames lives inside Connection, so this drives it through its public entry
// points rather than a copy of it. TransportError (FrameError, AuthError) is the expected
// rejection; any other exception, a sanitizer report, a handshake that accepts forged bytes, or a
// wait for bytes that can no longer come is a finding.
//
// Input: byte 0 picks the side the Connection plays; the rest is what the peer sends.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "base/error.h"
#include "comm/connection.h"
#include "comm/tcp_stream.h"

namespace {

constexpr std::string_view kSecret = "fuzzing secret";
// Far more than the two frames either side reads (28 + 256 bytes each at most), and little enough
// that one write never fills the socket buffers while nobody reads the other end yet.
constexpr size_t kMaxPeerBytes = 4096;

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "handshake_fuzzer: %s (errno %d: %s)\n", what, errno, std::strerror(errno));
  std::abort();
}

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "handshake_fuzzer: %s\n", what.c_str());
  std::abort();
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// A listening socket on an ephemeral loopback port, for the whole run.
class Listener {
 public:
  Listener() : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    if (fd_.get() < 0) die("socket");
    address_.sin_family = AF_INET;
    address_.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address_.sin_port = 0;
    socklen_t length = sizeof address_;
    if (::bind(fd_.get(), reinterpret_cast<const sockaddr*>(&address_), sizeof address_) != 0 ||
        ::listen(fd_.get(), 16) != 0 ||
        ::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&address_), &length) != 0) {
      die("bind/listen on 127.0.0.1");
    }
  }

  // A connected pair: the peer's end, and ours for the Connection. The peer closes first, so each
  // run leaves thousands of its ports in TIME_WAIT; Linux reuses those for new loopback connections
  // (net.ipv4.tcp_tw_reuse = 2, the default), so they do not run out.
  std::pair<Fd, Fd> connect_pair() const {
    Fd peer(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (peer.get() < 0) die("socket");
    if (connect_through_signals(peer.get()) != 0) {
      die(errno == EADDRNOTAVAIL ? "connect: out of loopback ports; is net.ipv4.tcp_tw_reuse 0?"
                                 : "connect to the listener");
    }
    int accepted;
    do {
      accepted = ::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC);
    } while (accepted < 0 && errno == EINTR);
    Fd ours(accepted);
    if (ours.get() < 0) die("accept");
    return {std::move(peer), std::move(ours)};
  }

 private:
  // libFuzzer's timer signal (-timeout) may interrupt connect(), which then goes on in the
  // background and must be waited for, not started again.
  int connect_through_signals(int fd) const {
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&address_), sizeof address_) == 0) return 0;
    if (errno != EINTR) return -1;
    pollfd entry{fd, POLLOUT, 0};
    while (::poll(&entry, 1, -1) < 0) {
      if (errno != EINTR) return -1;
    }
    int error = 0;
    socklen_t length = sizeof error;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) return -1;
    errno = error;
    return error == 0 ? 0 : -1;
  }

  Fd fd_;
  sockaddr_in address_{};
};

void send_all(int fd, const uint8_t* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) die("send to the connection under test");
    data += n;
    size -= static_cast<size_t>(n);
  }
}

// A failed connection stays failed (comm/connection.h): every later call rethrows the first error.
void check_stays_failed(dtrain::Connection& connection, const std::string& first) {
  if (connection.is_open()) finding("connection is open after a failed handshake");
  try {
    connection.receive();
  } catch (const dtrain::TransportError& again) {
    if (first != again.what()) {
      finding("a later call threw '" + std::string(again.what()) +
              "' instead of the first error '" + first + "'");
    }
    return;
  }
  finding("receive() on a failed connection did not throw");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Listener listener;
  if (size == 0) return 0;
  const bool as_server = (data[0] & 1) == 0;
  const uint8_t* peer_bytes = data + 1;
  const size_t peer_size = std::min(size - 1, kMaxPeerBytes);

  auto [peer, ours] = listener.connect_pair();
  send_all(peer.get(), peer_bytes, peer_size);
  // Everything the peer will ever send is now in flight: a read past it ends at once.
  if (::shutdown(peer.get(), SHUT_WR) != 0) die("shutdown(SHUT_WR)");

  dtrain::ConnectionOptions options;
  options.task_name = "fuzz-peer";
  options.io_timeout_ms = 5'000;
  options.handshake_timeout_ms = 5'000;
  dtrain::Connection connection(std::make_unique<dtrain::TcpStream>(ours.release(), "127.0.0.1:1"),
                                options);
  try {
    if (as_server) {
      connection.handshake_as_server(kSecret);
    } else {
      connection.handshake_as_client(kSecret);
    }
  } catch (const dtrain::TransportError& error) {
    const std::string what = error.what();
    if (what.find("timed out") != std::string::npos) {
      finding("waited for bytes the peer can no longer send: " + what);
    }
    check_stays_failed(connection, what);
    return 0;
  }
  // Passing needs a proof over our fresh random nonce, which the input cannot know.
  finding("the handshake accepted a peer that does not hold the secret");
}
