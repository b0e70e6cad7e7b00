#include "support/tamper_relay.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>
#include <vector>

#include "comm/crc32c.h"
#include "comm/frame_format.h"
#include "ps/ps_protocol.h"

namespace dtrain::testing {
namespace {

namespace ff = frame_format;

sockaddr_in loopback(uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(port);
  return address;
}

bool write_all(int fd, const std::byte* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// The client's stream, cut into frames. The HELLO says whether frames after the handshake carry a
// tag (comm/auth.h: the params' flag byte follows the 32-byte nonce).
class ClientStream {
 public:
  // Appends what arrived; returns the bytes to forward now (whole frames, pushes rewritten).
  std::vector<std::byte> take(const std::byte* data, size_t size, std::atomic<int>& rewritten) {
    pending_.insert(pending_.end(), data, data + size);
    std::vector<std::byte> out;
    for (;;) {
      if (pending_.size() < ff::kHeaderBytes) break;
      const auto payload_len =
          ff::load_le<uint64_t>(std::span(pending_).subspan(ff::kPayloadLenOffset));
      const auto type = ff::load_le<uint16_t>(std::span(pending_).subspan(ff::kTypeOffset));
      const bool handshake = type < ff::kFirstUserType;
      const size_t frame_size =
          ff::kHeaderBytes + payload_len + (tagged_ && !handshake ? kTagBytes : 0);
      if (pending_.size() < frame_size) break;
      const std::span<std::byte> frame = std::span(pending_).first(frame_size);
      if (type == ff::kTypeHello && payload_len > ff::kMetaLenBytes + 32) {
        tagged_ = (static_cast<uint8_t>(frame[ff::kHeaderBytes + ff::kMetaLenBytes + 32]) & 1) != 0;
      }
      if (type == ps_protocol::kPush)
        rewrite(frame.first(ff::kHeaderBytes + payload_len), rewritten);
      out.insert(out.end(), frame.begin(), frame.end());
      pending_.erase(pending_.begin(), pending_.begin() + static_cast<ptrdiff_t>(frame_size));
    }
    return out;
  }

 private:
  static constexpr size_t kTagBytes = 16;

  // Every float of the gradient negated: the ps then climbs the loss instead of descending it.
  // (Not the learning rate: a ps rejects a negative one as unusable.)
  static void rewrite(std::span<std::byte> frame, std::atomic<int>& rewritten) {
    const auto meta_len = ff::load_le<uint32_t>(frame.subspan(ff::kHeaderBytes));
    const size_t first_float = ff::kHeaderBytes + ff::kMetaLenBytes + meta_len;
    for (size_t at = first_float; at + sizeof(float) <= frame.size(); at += sizeof(float)) {
      frame[at + 3] ^= std::byte{0x80};  // the sign bit of a little-endian float32
    }
    const uint32_t crc =
        crc32c(frame.subspan(ff::kHeaderBytes), crc32c(frame.first(ff::kCrcOffset)));
    ff::store_le(frame.subspan(ff::kCrcOffset), crc);
    ++rewritten;
  }

  std::vector<std::byte> pending_;
  bool tagged_ = false;
};

}  // namespace

TamperRelay::TamperRelay(uint16_t target) : target_(target) {
  listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address = loopback(0);
  socklen_t length = sizeof address;
  if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      ::listen(listener_, 64) != 0 ||
      ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    if (listener_ >= 0) ::close(listener_);
    throw std::runtime_error("TamperRelay: cannot listen on loopback");
  }
  port_ = ntohs(address.sin_port);
  acceptor_ = std::jthread([this](std::stop_token stop) { accept_loop(stop); });
}

TamperRelay::~TamperRelay() {
  acceptor_.request_stop();
  acceptor_.join();
  ::close(listener_);
}

void TamperRelay::accept_loop(std::stop_token stop) {
  std::vector<std::jthread> pumps;
  while (!stop.stop_requested()) {
    pollfd fd{listener_, POLLIN, 0};
    // The slice bounds how late a stop is noticed.
    if (::poll(&fd, 1, 100) <= 0) continue;
    const int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    pumps.emplace_back([this, client](std::stop_token s) { pump(client, s); });
  }
}

void TamperRelay::pump(int client, std::stop_token stop) {
  const int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const sockaddr_in address = loopback(target_);
  if (server < 0 ||
      ::connect(server, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    if (server >= 0) ::close(server);
    ::close(client);
    return;
  }
  ClientStream from_client;
  std::vector<std::byte> buffer(1 << 16);
  bool open = true;
  while (open && !stop.stop_requested()) {
    pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
    if (::poll(fds, 2, 100) <= 0) continue;
    for (int i = 0; i < 2 && open; ++i) {
      if (fds[i].revents == 0) continue;
      const int from = fds[i].fd;
      const ssize_t n = ::recv(from, buffer.data(), buffer.size(), 0);
      if (n <= 0) {
        open = false;
        break;
      }
      if (from == server) {
        open = write_all(client, buffer.data(), static_cast<size_t>(n));
      } else {
        const auto out = from_client.take(buffer.data(), static_cast<size_t>(n), rewritten_);
        open = write_all(server, out.data(), out.size());
      }
    }
  }
  ::close(server);
  ::close(client);
}

}  // namespace dtrain::testing
