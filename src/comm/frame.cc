// Frame header encoding and the checks every received frame goes through.
#include "comm/frame.h"

#include <fmt/format.h>

#include <cctype>
#include <cstring>
#include <string>

#include "base/crc32c.h"
#include "base/error.h"

namespace dtrain {

namespace ff = frame_format;

namespace {

// "DTRN"-style rendering of a magic number, so a stray HTTP or TLS client is recognisable in logs.
std::string printable_magic(std::span<const std::byte> bytes) {
  std::string text;
  for (std::byte b : bytes) {
    const auto c = static_cast<unsigned char>(b);
    text += std::isprint(c) ? static_cast<char>(c) : '.';
  }
  return text;
}

}  // namespace

void encode_header(const FrameHeader& header, std::span<std::byte, ff::kHeaderBytes> out) {
  ff::store_le(out.subspan(ff::kMagicOffset), header.magic);
  ff::store_le(out.subspan(ff::kVersionOffset), header.version);
  ff::store_le(out.subspan(ff::kTypeOffset), header.type);
  ff::store_le(out.subspan(ff::kRequestIdOffset), header.request_id);
  ff::store_le(out.subspan(ff::kPayloadLenOffset), header.payload_len);
  ff::store_le(out.subspan(ff::kCrcOffset), header.crc32c);
}

FrameHeader decode_header(std::span<const std::byte, ff::kHeaderBytes> in,
                          uint64_t max_payload_bytes) {
  FrameHeader header;
  header.magic = ff::load_le<uint32_t>(in.subspan(ff::kMagicOffset));
  header.version = ff::load_le<uint16_t>(in.subspan(ff::kVersionOffset));
  header.type = ff::load_le<uint16_t>(in.subspan(ff::kTypeOffset));
  header.request_id = ff::load_le<uint64_t>(in.subspan(ff::kRequestIdOffset));
  header.payload_len = ff::load_le<uint64_t>(in.subspan(ff::kPayloadLenOffset));
  header.crc32c = ff::load_le<uint32_t>(in.subspan(ff::kCrcOffset));
  if (header.magic != ff::kMagic) {
    throw FrameError(fmt::format("bad magic 0x{:08X} (\"{}\"), expected 0x{:08X} (\"DTRN\")",
                                 header.magic, printable_magic(in.first(4)), ff::kMagic));
  }
  if (header.version != ff::kVersion) {
    throw FrameError(fmt::format("unsupported frame version {}, this build speaks version {}",
                                 header.version, ff::kVersion));
  }
  if (header.payload_len > max_payload_bytes) {
    throw FrameError(
        fmt::format("frame of type {} announces a {}-byte payload, over the {}-byte limit",
                    header.type, header.payload_len, max_payload_bytes));
  }
  if (header.payload_len < ff::kMetaLenBytes) {
    throw FrameError(
        fmt::format("frame of type {} announces a {}-byte payload, too short for its "
                    "{}-byte meta length",
                    header.type, header.payload_len, ff::kMetaLenBytes));
  }
  return header;
}

uint32_t header_crc(std::span<const std::byte, ff::kHeaderBytes> encoded) {
  return crc32c(encoded.first<ff::kCrcOffset>());
}

PayloadLayout payload_layout(uint64_t payload_len, uint32_t meta_len, uint64_t max_meta_bytes) {
  // decode_header refuses such a length already; checked again so that the subtraction below
  // cannot wrap for a caller that did not go through it.
  if (payload_len < ff::kMetaLenBytes) {
    throw FrameError(fmt::format("a {}-byte payload is too short for its {}-byte meta length",
                                 payload_len, ff::kMetaLenBytes));
  }
  const uint64_t after_meta_len = payload_len - ff::kMetaLenBytes;
  if (meta_len > after_meta_len) {
    throw FrameError(
        fmt::format("meta length {} overruns the {}-byte payload", meta_len, payload_len));
  }
  if (meta_len > max_meta_bytes) {
    throw FrameError(
        fmt::format("meta length {} is over the {}-byte limit", meta_len, max_meta_bytes));
  }
  PayloadLayout layout{meta_len, after_meta_len - meta_len};
  if (layout.tensor_bytes % ff::kFloatBytes != 0) {
    throw FrameError(
        fmt::format("{} tensor bytes are not a whole number of float32s", layout.tensor_bytes));
  }
  return layout;
}

std::vector<std::byte> encode_frame(uint16_t type, uint64_t request_id,
                                    std::span<const std::byte> meta,
                                    std::span<const std::span<const float>> tensors) {
  uint64_t tensor_bytes = 0;
  for (auto t : tensors) tensor_bytes += t.size_bytes();
  FrameHeader header;
  header.type = type;
  header.request_id = request_id;
  header.payload_len = ff::kMetaLenBytes + meta.size() + tensor_bytes;

  std::vector<std::byte> frame(ff::kHeaderBytes + header.payload_len);
  std::span<std::byte> rest(frame);
  rest = rest.subspan(ff::kHeaderBytes);
  ff::store_le(rest, static_cast<uint32_t>(meta.size()));
  rest = rest.subspan(ff::kMetaLenBytes);
  if (!meta.empty()) std::memcpy(rest.data(), meta.data(), meta.size());
  rest = rest.subspan(meta.size());
  for (auto t : tensors) {
    if (!t.empty()) std::memcpy(rest.data(), t.data(), t.size_bytes());
    rest = rest.subspan(t.size_bytes());
  }

  const auto head = std::span(frame).first<ff::kHeaderBytes>();
  encode_header(header, head);
  header.crc32c = crc32c(std::span(frame).subspan(ff::kHeaderBytes), header_crc(head));
  encode_header(header, head);
  return frame;
}

DecodedFrame decode_frame(std::span<const std::byte> frame, uint64_t max_payload_bytes,
                          uint64_t max_meta_bytes) {
  if (frame.size() < ff::kHeaderBytes) {
    throw FrameError(fmt::format("{} bytes are too short for a {}-byte frame header", frame.size(),
                                 ff::kHeaderBytes));
  }
  const auto head = frame.first<ff::kHeaderBytes>();
  DecodedFrame decoded;
  decoded.header = decode_header(head, max_payload_bytes);
  const auto payload = frame.subspan(ff::kHeaderBytes);
  if (payload.size() != decoded.header.payload_len) {
    throw FrameError(fmt::format("frame has {} payload bytes but its header announces {}",
                                 payload.size(), decoded.header.payload_len));
  }
  const auto layout =
      payload_layout(payload.size(), ff::load_le<uint32_t>(payload), max_meta_bytes);
  decoded.meta = payload.subspan(ff::kMetaLenBytes, layout.meta_len);
  decoded.tensor_bytes = payload.subspan(ff::kMetaLenBytes + layout.meta_len);
  const uint32_t crc = crc32c(payload, header_crc(head));
  if (crc != decoded.header.crc32c) {
    throw FrameError(fmt::format("bad CRC32C: computed 0x{:08X}, header says 0x{:08X}", crc,
                                 decoded.header.crc32c));
  }
  return decoded;
}

}  // namespace dtrain
