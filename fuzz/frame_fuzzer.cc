// libFuzzer target for the frame decoder (comm/frame.h): whole frames through decode_frame, their
// first 28 bytes through decode_header, and meta lengths through payload_layout, under limits the
// input picks. A FrameError is the expected rejection; any other exception, a sanitizer report, or
// an accepted frame that breaks the format (comm/frame_format.h) is a finding.
//
// Input: byte 0 picks the limits and whether to re-seal the CRC (so that mutated fields get past
// the checksum and reach the checks after it); the rest is the frame.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "base/crc32c.h"
#include "base/error.h"
#include "comm/frame.h"

namespace {

namespace ff = dtrain::frame_format;

// Limits a caller may configure: the handshake's or a small one, the default, none at all.
constexpr std::array<uint64_t, 4> kPayloadLimits = {
    ff::kMaxHandshakePayloadBytes, uint64_t{1} << 20, uint64_t{1} << 30, UINT64_MAX};
constexpr std::array<uint64_t, 4> kMetaLimits = {0, 64, uint64_t{16} << 20, UINT64_MAX};

// Stops the run when an accepted input breaks what the format promises.
void require(bool holds, const char* property) {
  if (holds) return;
  std::fprintf(stderr, "frame_fuzzer: accepted input breaks: %s\n", property);
  std::abort();
}

void check_layout(const dtrain::PayloadLayout& layout, uint64_t payload_len, uint32_t meta_len,
                  uint64_t max_meta) {
  require(layout.meta_len == meta_len, "layout keeps the meta length");
  require(layout.meta_len <= max_meta, "meta within its limit");
  require(payload_len >= ff::kMetaLenBytes &&
              layout.tensor_bytes == payload_len - ff::kMetaLenBytes - layout.meta_len,
          "meta length, meta and tensors add up to the payload");
  require(layout.tensor_bytes % ff::kFloatBytes == 0, "tensor bytes are whole float32s");
}

// An accepted frame must be exactly what encode_frame makes of its parts.
void check_decoded(const dtrain::DecodedFrame& decoded, std::span<const std::byte> frame,
                   uint64_t max_payload, uint64_t max_meta) {
  const dtrain::FrameHeader& header = decoded.header;
  require(header.magic == ff::kMagic && header.version == ff::kVersion, "magic and version");
  require(header.payload_len <= max_payload, "payload within its limit");
  require(frame.size() == ff::kHeaderBytes + header.payload_len, "frame length matches header");
  check_layout({static_cast<uint32_t>(decoded.meta.size()), decoded.tensor_bytes.size()},
               header.payload_len, static_cast<uint32_t>(decoded.meta.size()), max_meta);
  require(decoded.meta.data() == frame.data() + ff::kHeaderBytes + ff::kMetaLenBytes,
          "meta views the frame after the meta length");
  require(decoded.tensor_bytes.data() + decoded.tensor_bytes.size() == frame.data() + frame.size(),
          "tensors view the end of the frame");

  std::vector<float> floats(decoded.tensor_bytes.size() / ff::kFloatBytes);
  if (!floats.empty()) {
    std::memcpy(floats.data(), decoded.tensor_bytes.data(), decoded.tensor_bytes.size());
  }
  const std::span<const float> tensors[] = {floats};
  const std::vector<std::byte> again =
      dtrain::encode_frame(header.type, header.request_id, decoded.meta, tensors);
  require(
      again.size() == frame.size() && std::memcmp(again.data(), frame.data(), again.size()) == 0,
      "re-encoding the decoded parts gives back the frame");
}

void fuzz_whole_frame(std::span<const std::byte> frame, uint64_t max_payload, uint64_t max_meta) {
  try {
    check_decoded(dtrain::decode_frame(frame, max_payload, max_meta), frame, max_payload, max_meta);
  } catch (const dtrain::FrameError&) {
  }
}

// The streaming path's order (comm/connection.cc): the header, then the meta length after it.
void fuzz_header_then_layout(std::span<const std::byte> frame, uint64_t max_payload,
                             uint64_t max_meta) {
  if (frame.size() < ff::kHeaderBytes) return;
  dtrain::FrameHeader header;
  try {
    header = dtrain::decode_header(frame.first<ff::kHeaderBytes>(), max_payload);
  } catch (const dtrain::FrameError&) {
    return;
  }
  require(header.payload_len >= ff::kMetaLenBytes && header.payload_len <= max_payload,
          "decode_header bounds the payload length");
  const auto rest = frame.subspan(ff::kHeaderBytes);
  const uint32_t meta_len = rest.size() >= ff::kMetaLenBytes ? ff::load_le<uint32_t>(rest) : 0;
  try {
    check_layout(dtrain::payload_layout(header.payload_len, meta_len, max_meta), header.payload_len,
                 meta_len, max_meta);
  } catch (const dtrain::FrameError&) {
  }
}

// payload_layout on its own, with a payload length no header vouched for.
void fuzz_layout_alone(std::span<const std::byte> frame, uint64_t max_meta) {
  if (frame.size() < 12) return;
  const uint64_t payload_len = ff::load_le<uint64_t>(frame);
  const uint32_t meta_len = ff::load_le<uint32_t>(frame.subspan(8));
  try {
    check_layout(dtrain::payload_layout(payload_len, meta_len, max_meta), payload_len, meta_len,
                 max_meta);
  } catch (const dtrain::FrameError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t control = data[0];
  const uint64_t max_payload = kPayloadLimits[control & 3];
  const uint64_t max_meta = kMetaLimits[(control >> 2) & 3];
  const bool reseal = (control & 0x10) != 0;

  std::vector<std::byte> frame(size - 1);
  if (!frame.empty()) std::memcpy(frame.data(), data + 1, frame.size());
  if (reseal && frame.size() >= ff::kHeaderBytes) {
    const std::span<std::byte> all(frame);
    const uint32_t crc = dtrain::crc32c(all.subspan(ff::kHeaderBytes),
                                        dtrain::header_crc(all.first<ff::kHeaderBytes>()));
    ff::store_le(all.subspan(ff::kCrcOffset), crc);
  }

  fuzz_whole_frame(frame, max_payload, max_meta);
  fuzz_header_then_layout(frame, max_payload, max_meta);
  fuzz_layout_alone(frame, max_meta);
  return 0;
}
