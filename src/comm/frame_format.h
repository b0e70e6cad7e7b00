// The dtrain wire format, shared by every reader and writer of frames. A connection carries a
// sequence of frames; each is a fixed 28-byte header and a payload, all integers little-endian:
//
//   header:  magic u32 | version u16 | type u16 | request_id u64 | payload_len u64 | crc32c u32
//   payload: meta_len u32 | meta (meta_len bytes) | tensor bytes (payload_len - 4 - meta_len)
//
// magic is the ASCII bytes "DTRN". The meta block is a small binary record whose layout belongs to
// the frame's type (the caller defines it; store_le/load_le below help); the tensor bytes are raw
// little-endian elements (float32, or the element type the meta names where the protocol carries
// one), so they leave and land in the caller's buffers without a copy. crc32c is
// the CRC-32C (base/crc32c.h) of the 24 encoded header bytes before it followed by the whole
// payload. Types 1-15 belong to the connection handshake (comm/auth.h); callers use 16 and up.
//
// On a connection whose frames are authenticated (the default, agreed in the handshake), every
// frame after the handshake instead has 0 in crc32c and carries 16-byte tags (comm/frame_mac.h):
//
//   header | meta_len | meta | opening tag | tensor bytes | tensor tag (only if tensor bytes)
//
// The opening tag is the GMAC of the header, meta length and meta; the tensor tag, of the tensor
// bytes; both under that direction's key, numbered by the frame's position in that direction and
// by the part. The receiver checks the opening before it returns any of it, so nothing is acted
// on, nor even used to choose where the tensors go, before it is authenticated. The tags also
// catch everything the CRC would.
#pragma once

#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>

namespace dtrain::frame_format {

// Tensors travel as the host's float32 bytes, which must therefore be little-endian.
static_assert(std::endian::native == std::endian::little,
              "frames carry floats in host order, which must be little-endian");

inline constexpr uint32_t kMagic = 0x4E525444;  // "DTRN" as little-endian bytes
// 2: handshake params, frame tags; 3: the ps hello names the ps process and the step it restored,
// ring links offer a shared mailbox; 4: the opening of a tagged frame has its own tag. (The link
// step after the handshake kept 4: a task from before it stops at its first frame, type 7, saying
// so.) 5: the ps hello has no memory fields and the ps's by-reference types are gone (the link
// moves payloads by reference, into landings the receiver offers). 6: a ring chunk's meta and the
// ps push and shard replies say the element type and codec of their tensors
// (tensor/element_type.h). Tasks of different versions refuse each other at the first frame, naming
// both versions, rather than misreading a field.
inline constexpr uint16_t kVersion = 6;

// Header field offsets and sizes.
inline constexpr size_t kMagicOffset = 0;
inline constexpr size_t kVersionOffset = 4;
inline constexpr size_t kTypeOffset = 6;
inline constexpr size_t kRequestIdOffset = 8;
inline constexpr size_t kPayloadLenOffset = 16;
inline constexpr size_t kCrcOffset = 24;  // the CRC covers the header bytes before this
inline constexpr size_t kHeaderBytes = 28;

inline constexpr size_t kMetaLenBytes = 4;  // the u32 that opens every payload
inline constexpr size_t kFloatBytes = 4;

// Handshake frame types (comm/auth.h has the protocol). Their payloads carry only meta:
inline constexpr uint16_t kTypeHello = 1;       // client: nonce_c (32 bytes) | params
inline constexpr uint16_t kTypeChallenge = 2;   // server: nonce_s (32) | server proof (32) | params
inline constexpr uint16_t kTypeProof = 3;       // client: client proof (32)
inline constexpr uint16_t kTypeAuthOk = 4;      // server: empty
inline constexpr uint16_t kTypeAuthFailed = 5;  // either side, before it hangs up: empty
// server, in place of AUTH_OK to a client that proved the secret but may not connect now (its
// identity is another live connection's): the reason, as text
inline constexpr uint16_t kTypeRefused = 6;
// After the handshake, authenticated like every later frame: the link step (comm/link_setup.h),
// which chooses whether payloads travel by value or by reference, and on a by-reference link the
// frame that wakes a peer asleep on its socket (comm/memory_link.h).
inline constexpr uint16_t kTypeLinkOffer = 7;   // client: wants u8, then if 1 a challenge
inline constexpr uint16_t kTypeLinkAnswer = 8;  // server: verdict u8, offer and challenge or why
inline constexpr uint16_t kTypeLinkProof = 9;   // client: verdict u8, offer and mailbox fd or why
inline constexpr uint16_t kTypeLinkReady = 10;  // server: verdict u8, then why if not 1
inline constexpr uint16_t kTypeWake = 11;       // either side, by-reference links: empty
inline constexpr uint16_t kFirstUserType = 16;  // types below this are reserved for comm/

// A handshake frame is tiny, so a peer that has not yet authenticated can make the other side
// read at most this much.
inline constexpr uint64_t kMaxHandshakePayloadBytes = 256;

struct FrameHeader {
  uint32_t magic = kMagic;
  uint16_t version = kVersion;
  uint16_t type = 0;
  uint64_t request_id = 0;
  uint64_t payload_len = 0;
  uint32_t crc32c = 0;
};

// Explicit little-endian integer fields, independent of the host's byte order.
// REQUIRES: out.size() >= sizeof(T) (resp. in.size()).
template <std::unsigned_integral T>
void store_le(std::span<std::byte> out, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) out[i] = static_cast<std::byte>(value >> (8 * i));
}

template <std::unsigned_integral T>
T load_le(std::span<const std::byte> in) {
  T value = 0;
  for (size_t i = 0; i < sizeof(T); ++i) value |= static_cast<T>(in[i]) << (8 * i);
  return value;
}

}  // namespace dtrain::frame_format
