#include "support/tamper_relay.h"

#include <cstring>
#include <vector>

#include "comm/crc32c.h"
#include "comm/frame_format.h"
#include "ps/ps_protocol.h"

namespace dtrain::testing {
namespace {

namespace ff = frame_format;

// The client's stream, cut into frames. The HELLO says whether frames after the handshake carry a
// tag (comm/auth.h: the params' flag byte follows the 32-byte nonce).
class ClientStream {
 public:
  // Takes what arrived; appends to out what to forward now (whole frames, pushes rewritten).
  void take(std::span<const std::byte> in, std::vector<std::byte>& out,
            std::atomic<int>& rewritten) {
    pending_.insert(pending_.end(), in.begin(), in.end());
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

// What the server sends passes as it is.
class Rewriter final : public Forwarder::Filter {
 public:
  explicit Rewriter(std::shared_ptr<std::atomic<int>> rewritten)
      : rewritten_(std::move(rewritten)) {}
  bool from_client(std::span<const std::byte> in, std::vector<std::byte>& out) override {
    stream_.take(in, out, *rewritten_);
    return true;
  }
  bool from_server(std::span<const std::byte> in, std::vector<std::byte>& out) override {
    out.insert(out.end(), in.begin(), in.end());
    return true;
  }

 private:
  ClientStream stream_;
  std::shared_ptr<std::atomic<int>> rewritten_;
};

}  // namespace

TamperRelay::TamperRelay(uint16_t target)
    : forwarder_(std::make_unique<Forwarder>(
          target, [this] { return std::make_unique<Rewriter>(rewritten_); })) {}

}  // namespace dtrain::testing
