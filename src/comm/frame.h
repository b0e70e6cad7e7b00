// Encoding and validating frames (the format is in comm/frame_format.h). The streaming path of
// comm/connection.h uses the header functions piece by piece; encode_frame / decode_frame handle a
// whole frame in one buffer, for tests and tools.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "comm/frame_format.h"

namespace dtrain {

using frame_format::FrameHeader;

// A received frame's opening, as Connection::receive returns it.
struct IncomingFrame {
  uint16_t type = 0;
  uint64_t request_id = 0;
  std::span<const std::byte> meta;  // valid until the next receive
  uint64_t tensor_bytes = 0;        // still to be read by receive_tensors / discard_tensors
};

// Writes every header field, crc32c included, little-endian.
void encode_header(const FrameHeader& header, std::span<std::byte, frame_format::kHeaderBytes> out);

// Parses a header and checks what can be checked before reading the payload: magic, version, and
// kMetaLenBytes <= payload_len <= max_payload_bytes, so that a hostile or corrupt length is
// refused before anything is allocated for it. Throws FrameError saying which field is wrong and
// why (the caller adds who sent it). The type and the CRC are the caller's to check.
FrameHeader decode_header(std::span<const std::byte, frame_format::kHeaderBytes> in,
                          uint64_t max_payload_bytes);

// The CRC-32C of the header fields before crc32c: the start of the chain that continues over the
// payload (crc32c(payload_piece, crc) for each piece in order).
uint32_t header_crc(std::span<const std::byte, frame_format::kHeaderBytes> encoded);

// How a payload of payload_len bytes splits, given the meta_len it opens with. Throws FrameError
// if the payload is too short to hold the meta length itself, if meta_len does not fit in the
// payload or exceeds max_meta_bytes, or if the tensor bytes are not whole float32s.
struct PayloadLayout {
  uint32_t meta_len = 0;
  uint64_t tensor_bytes = 0;
};
PayloadLayout payload_layout(uint64_t payload_len, uint32_t meta_len, uint64_t max_meta_bytes);

// A whole frame (header, meta, tensors back to back) with its CRC.
std::vector<std::byte> encode_frame(uint16_t type, uint64_t request_id,
                                    std::span<const std::byte> meta,
                                    std::span<const std::span<const float>> tensors);

// Validates a whole frame: the header as decode_header, the length of `frame` against
// payload_len, the payload layout, and the CRC. Throws FrameError. The spans view `frame`.
struct DecodedFrame {
  FrameHeader header;
  std::span<const std::byte> meta;
  std::span<const std::byte> tensor_bytes;
};
DecodedFrame decode_frame(std::span<const std::byte> frame, uint64_t max_payload_bytes,
                          uint64_t max_meta_bytes);

}  // namespace dtrain
