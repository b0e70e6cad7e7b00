// The TFRecord framing (TensorFlow's core/lib/io/record_writer.h), the one copy that data/'s
// reader and writer and metrics/' TensorBoard event files use: each record is its length, a masked
// CRC32C of the length, the data, and a masked CRC32C of the data, all little-endian.
//
//   uint64 length | uint32 masked_crc32c(length bytes) | byte data[length] | uint32
//   masked_crc32c(data)
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "base/crc32c.h"

namespace dtrain::tfrecord {

constexpr size_t kLengthBytes = 8;
constexpr size_t kCrcBytes = 4;
constexpr size_t kHeaderBytes = kLengthBytes + kCrcBytes;  // length + its CRC
constexpr size_t kFooterBytes = kCrcBytes;                 // the data's CRC
// A record longer than this is refused before anything is allocated for it: a flipped bit in a
// length must not ask for terabytes. MNIST's records are about 800 bytes.
constexpr uint64_t kMaxRecordBytes = uint64_t{256} << 20;

// TensorFlow masks every stored CRC (crc32c.h, "Mask"): a CRC computed over data that itself holds
// CRCs is then not trivially related to them.
constexpr uint32_t kMaskDelta = 0xa282ead8u;

constexpr uint32_t mask_crc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }
constexpr uint32_t unmask_crc(uint32_t masked) {
  const uint32_t rotated = masked - kMaskDelta;
  return (rotated >> 17) | (rotated << 15);
}

inline uint32_t masked_crc32c(std::span<const std::byte> bytes) { return mask_crc(crc32c(bytes)); }

inline void put_u32(std::byte* out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<std::byte>(value >> (8 * i));
}
inline void put_u64(std::byte* out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::byte>(value >> (8 * i));
}
inline uint32_t get_u32(const std::byte* in) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= uint32_t{std::to_integer<uint8_t>(in[i])} << (8 * i);
  return value;
}
inline uint64_t get_u64(const std::byte* in) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= uint64_t{std::to_integer<uint8_t>(in[i])} << (8 * i);
  return value;
}

// What goes before and after a record's data.
inline std::array<std::byte, kHeaderBytes> record_header(uint64_t length) {
  std::array<std::byte, kHeaderBytes> header{};
  put_u64(header.data(), length);
  put_u32(header.data() + kLengthBytes, masked_crc32c(std::span(header.data(), kLengthBytes)));
  return header;
}
inline std::array<std::byte, kFooterBytes> record_footer(std::span<const std::byte> data) {
  std::array<std::byte, kFooterBytes> footer{};
  put_u32(footer.data(), masked_crc32c(data));
  return footer;
}

}  // namespace dtrain::tfrecord
