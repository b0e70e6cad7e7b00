// Per-frame authentication once the handshake is done: each direction of a connection has its own
// AES-128 key, derived from the handshake (comm/auth.h: frame_keys), and every frame carries GMAC
// tags (AES-128-GCM over no plaintext, the bytes as additional data): one over its opening (header
// and meta) and, when it has tensors, one over those. Each tag's nonce is the frame's number in
// that direction and which part it covers, so no tag is valid anywhere else. A relay without the
// secret cannot alter a frame, and cannot replay, reorder or drop one either: the receiver counts
// frames itself, so any of these makes the next tag fail.
//
// Why GMAC: it is the fastest sound MAC there is on hardware with carry-less multiplication (GHASH
// runs at several times HMAC-SHA256's speed), and with a fresh nonce per frame it is a sound MAC.
// A counter never repeats under one key: keys are per connection and per direction, and a
// connection ends long before 2^64 frames. Two implementations compute it: Intel's ipsec-mb where
// it was built in (its AVX-512 GHASH is 2.5 times OpenSSL 3.0's here, comm/gmac_ipsec_mb.h), else
// OpenSSL. Their tags are the same, so peers built either way talk.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

struct evp_cipher_ctx_st;

namespace dtrain {

inline constexpr size_t kFrameKeyBytes = 16;  // AES-128
inline constexpr size_t kFrameTagBytes = 16;
using FrameKey = std::array<std::byte, kFrameKeyBytes>;
using FrameTag = std::array<std::byte, kFrameTagBytes>;

// The part of a frame a tag covers: the opening is checked before anything in it is used, the
// tensors once they are in.
enum class FramePart : uint32_t { kOpening = 0, kTensors = 1 };

// Who computes the tags. kFastest: ipsec-mb where it was built in, else OpenSSL.
enum class MacEngine { kFastest, kOpenSsl, kIpsecMb };

// Whether `engine` was built in (kOpenSsl and kFastest always are).
bool mac_engine_available(MacEngine engine);
// What computes the tags of MacEngine::kFastest, for the logs: "ipsec-mb (AVX-512)", "OpenSSL".
std::string mac_engine_name();

class IpsecGmac;

// One direction's tags: begin(n, part), update() over that part's bytes in order, then tag(). Not
// thread-safe; a connection's sender and receiver each own one.
class FrameMac {
 public:
  // Throws dtrain::Error for an engine that was not built in.
  explicit FrameMac(const FrameKey& key, MacEngine engine = MacEngine::kFastest);
  ~FrameMac();
  FrameMac(const FrameMac&) = delete;
  FrameMac& operator=(const FrameMac&) = delete;

  // Starts the tag of `part` of frame number `frame` (0, 1, 2 … in this direction).
  void begin(uint64_t frame, FramePart part);
  // Adds the next bytes of the frame; any length, any split (the tag depends only on the bytes).
  void update(std::span<const std::byte> bytes);
  // The tag of the bytes since begin(). Throws dtrain::Error if OpenSSL fails.
  FrameTag tag();
  // Whether `received` equals tag(), compared in time independent of where they differ.
  bool verify(const FrameTag& received);

 private:
  evp_cipher_ctx_st* ctx_ = nullptr;  // OpenSSL's, or
  std::unique_ptr<IpsecGmac> ipsec_;  // ipsec-mb's
};

}  // namespace dtrain
