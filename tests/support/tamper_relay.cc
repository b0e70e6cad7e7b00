#include "support/tamper_relay.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <string_view>
#include <vector>

#include "base/crc32c.h"
#include "cluster/membership_view.h"
#include "collective/ring_protocol.h"
#include "comm/frame.h"
#include "comm/frame_format.h"
#include "ps/ps_protocol.h"

namespace dtrain::testing {
namespace {

namespace ff = frame_format;
namespace proto = ps_protocol;

constexpr size_t kTagBytes = 16;
constexpr int kForgeAt = 20;  // which frame of its type the relay forges

// One direction of a connection, cut into whole frames (comm/frame_format.h). After the
// handshake (the link step's frames included), a tagged frame carries a tag after its meta and, if
// it has tensors, one after those.
class FrameCutter {
 public:
  using OnFrame = std::function<void(std::vector<std::byte>& frame, uint16_t type)>;

  explicit FrameCutter(const bool& tagged) : tagged_(tagged) {}

  // Takes what arrived; hands each whole frame to on_frame, which may rewrite or replace it, and
  // appends the result to out.
  void take(std::span<const std::byte> in, std::vector<std::byte>& out, const OnFrame& on_frame) {
    pending_.insert(pending_.end(), in.begin(), in.end());
    for (;;) {
      const size_t size = whole_frame();
      if (size == 0) break;
      std::vector<std::byte> frame(pending_.begin(),
                                   pending_.begin() + static_cast<ptrdiff_t>(size));
      pending_.erase(pending_.begin(), pending_.begin() + static_cast<ptrdiff_t>(size));
      on_frame(frame, ff::load_le<uint16_t>(std::span(frame).subspan(ff::kTypeOffset)));
      out.insert(out.end(), frame.begin(), frame.end());
    }
  }

 private:
  // The size of the frame at the front of pending_, 0 if it is not all in.
  size_t whole_frame() const {
    const std::span<const std::byte> p(pending_);
    if (p.size() < ff::kHeaderBytes + ff::kMetaLenBytes) return 0;
    const auto type = ff::load_le<uint16_t>(p.subspan(ff::kTypeOffset));
    const auto payload_len = ff::load_le<uint64_t>(p.subspan(ff::kPayloadLenOffset));
    const auto meta_len = ff::load_le<uint32_t>(p.subspan(ff::kHeaderBytes));
    size_t size = ff::kHeaderBytes + payload_len;
    if (tagged_ && type >= ff::kTypeLinkOffer) {  // the handshake's frames are not tagged
      size += kTagBytes;
      if (payload_len > ff::kMetaLenBytes + meta_len) size += kTagBytes;
    }
    return p.size() >= size ? size : 0;
  }

  const bool& tagged_;
  std::vector<std::byte> pending_;
};

// A frame as a relay without the secret makes it: a well-formed header and meta, tags of junk.
std::vector<std::byte> forged_frame(uint16_t type, std::span<const std::byte> meta,
                                    size_t tensor_bytes) {
  const size_t opening = ff::kHeaderBytes + ff::kMetaLenBytes + meta.size();
  std::vector<std::byte> frame(
      opening + kTagBytes + (tensor_bytes > 0 ? tensor_bytes + kTagBytes : 0),
      std::byte{0x5A});  // the tags' junk; the tensors are zeroed below
  ff::store_le(std::span(frame).subspan(ff::kMagicOffset), ff::kMagic);
  ff::store_le(std::span(frame).subspan(ff::kVersionOffset), ff::kVersion);
  ff::store_le(std::span(frame).subspan(ff::kTypeOffset), type);
  ff::store_le(std::span(frame).subspan(ff::kPayloadLenOffset),
               uint64_t{ff::kMetaLenBytes + meta.size() + tensor_bytes});
  ff::store_le(std::span(frame).subspan(ff::kRequestIdOffset), uint64_t{0});
  ff::store_le(std::span(frame).subspan(ff::kCrcOffset), uint32_t{0});
  ff::store_le(std::span(frame).subspan(ff::kHeaderBytes), static_cast<uint32_t>(meta.size()));
  std::copy(meta.begin(), meta.end(), frame.begin() + ff::kHeaderBytes + ff::kMetaLenBytes);
  std::fill_n(frame.begin() + static_cast<ptrdiff_t>(opening + kTagBytes), tensor_bytes,
              std::byte{0});
  return frame;
}

// Every float of the gradient negated: the ps then climbs the loss instead of descending it.
// (Not the learning rate: a ps rejects a negative one as unusable.)
void negate_gradient(std::span<std::byte> frame) {
  const auto payload_len = ff::load_le<uint64_t>(frame.subspan(ff::kPayloadLenOffset));
  const auto meta_len = ff::load_le<uint32_t>(frame.subspan(ff::kHeaderBytes));
  const size_t first_float = ff::kHeaderBytes + ff::kMetaLenBytes + meta_len;
  const size_t end = ff::kHeaderBytes + payload_len;
  // Where frames are tagged, the tensors start after the opening's tag; the tags stay as they are.
  const bool tagged = frame.size() > end;
  const size_t shift = tagged ? kTagBytes : 0;
  for (size_t at = first_float + shift; at + sizeof(float) <= end + shift; at += sizeof(float)) {
    frame[at + 3] ^= std::byte{0x80};  // the sign bit of a little-endian float32
  }
  if (tagged) return;
  const uint32_t crc =
      crc32c(frame.subspan(ff::kHeaderBytes, payload_len), crc32c(frame.first(ff::kCrcOffset)));
  ff::store_le(frame.subspan(ff::kCrcOffset), crc);
}

class Tamperer final : public Forwarder::Filter {
 public:
  Tamperer(Attack attack, std::shared_ptr<std::atomic<int>> tampered,
           std::shared_ptr<std::atomic<bool>> forged)
      : attack_(attack), tampered_(std::move(tampered)), forged_(std::move(forged)) {}

  bool from_client(std::span<const std::byte> in, std::vector<std::byte>& out) override {
    client_.take(in, out, [&](std::vector<std::byte>& frame, uint16_t type) {
      // The HELLO says whether frames after the handshake carry tags (comm/auth.h: the params'
      // flag byte follows the 32-byte nonce).
      if (type == ff::kTypeHello && frame.size() > ff::kHeaderBytes + ff::kMetaLenBytes + 32) {
        tagged_ = (static_cast<uint8_t>(frame[ff::kHeaderBytes + ff::kMetaLenBytes + 32]) & 1) != 0;
      }
      if (attack_ == Attack::kForgeRingAbort && type == ring_protocol::kRingChunk &&
          ++chunks_ == 3) {
        constexpr std::string_view kText = "forged abort\x1b[2J";
        forge(frame, ring_protocol::kRingAbort, std::as_bytes(std::span(kText)), 4);
        return;
      }
      if (type != proto::kPush) return;
      if (attack_ == Attack::kNegatePushes) {
        negate_gradient(frame);
        ++*tampered_;
      } else if (attack_ == Attack::kForgeDoneWithTensors && ++pushes_ == kForgeAt) {
        const std::byte done[] = {std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0},
                                  std::byte{1}};  // worker 0 (i32), finished 1 (u8)
        forge(frame, proto::kWorkerDone, done, 4);
      }
    });
    return true;
  }

  bool from_server(std::span<const std::byte> in, std::vector<std::byte>& out) override {
    bool cut = false;
    bool cut_now = false;
    server_.take(in, out, [&](std::vector<std::byte>& frame, uint16_t type) {
      if (attack_ == Attack::kForgeAuthFailed && type == ff::kTypeChallenge &&
          !forged_->exchange(true)) {
        frame = encode_frame(ff::kTypeAuthFailed, 0, {}, {});
        ++*tampered_;
        cut = true;
        return;
      }
      if (attack_ == Attack::kCutClaimReply && type == proto::kClaimReply &&
          !forged_->exchange(true)) {
        frame.clear();
        ++*tampered_;
        cut_now = true;
        return;
      }
      if (attack_ == Attack::kForgeMembershipView && type == membership_protocol::kView) {
        constexpr std::string_view kFailed = R"({"error": "stop\u001b[2J"})";
        forge(frame, membership_protocol::kFailed, std::as_bytes(std::span(kFailed)), 0);
        return;
      }
      if (attack_ != Attack::kForgeError || type < ff::kFirstUserType) return;
      if (++replies_ != kForgeAt) return;
      constexpr std::string_view kText = "stop\x1b[2J";
      forge(frame, proto::kError, std::as_bytes(std::span(kText)), 4);
    });
    if (cut_now) return false;
    // The forged answer goes out; the connection is cut after it, as a failing server would.
    if (cut) {
      cut_after_ = true;
      return true;
    }
    return !cut_after_;
  }

 private:
  void forge(std::vector<std::byte>& frame, uint16_t type, std::span<const std::byte> meta,
             size_t tensor_bytes) {
    if (forged_->exchange(true)) return;  // once in the relay's life
    frame = forged_frame(type, meta, tensor_bytes);
    ++*tampered_;
  }

  const Attack attack_;
  bool tagged_ = false;  // set from the client's HELLO, read by both directions' cutters
  FrameCutter client_{tagged_};
  FrameCutter server_{tagged_};
  bool cut_after_ = false;
  int pushes_ = 0;
  int chunks_ = 0;
  int replies_ = 0;
  std::shared_ptr<std::atomic<int>> tampered_;
  std::shared_ptr<std::atomic<bool>> forged_;
};

}  // namespace

TamperRelay::TamperRelay(uint16_t target, Attack attack)
    : forwarder_(std::make_unique<Forwarder>(target, [this, attack] {
        return std::make_unique<Tamperer>(attack, tampered_, forged_);
      })) {}

}  // namespace dtrain::testing
