// Frames in from a TcpStream, blocking or as far as the socket allows.
#include "comm/frame_reader.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/error.h"

namespace dtrain {

namespace ff = frame_format;

namespace {

// Tensor bytes are received and checked (CRC or tag) in chunks of this size, so the check reads
// each chunk while it is still in cache.
constexpr size_t kReceiveChunkBytes = size_t{1} << 20;

FrameError bad_frame_from(const std::string& peer, const FrameError& error) {
  return FrameError(fmt::format("bad frame from {}: {}", peer, error.what()));
}

}  // namespace

void check_tensors_allowed(bool (*type_carries_tensors)(uint16_t), const std::string& peer,
                           const IncomingFrame& frame) {
  if (frame.tensor_bytes == 0 || type_carries_tensors == nullptr ||
      type_carries_tensors(frame.type)) {
    return;
  }
  throw FrameError(fmt::format(
      "bad frame from {}: type {} (request {}) carries no tensors, but this one declares {} "
      "tensor bytes",
      peer, frame.type, frame.request_id, frame.tensor_bytes));
}

IncomingFrame FrameReader::read(const IoDeadline& first_byte, const IoDeadline& rest,
                                uint64_t max_payload_bytes, bool handshake) {
  std::array<std::byte, ff::kHeaderBytes> header_bytes;
  const size_t got = stream_.read_some(header_bytes, first_byte);
  if (got == 0) throw PeerClosed(fmt::format("{} closed the connection", stream_.peer()));
  stream_.read_exact(std::span(header_bytes).subspan(got), rest);
  accept_header(header_bytes, max_payload_bytes, handshake);  // before reading on: it may be junk
  std::array<std::byte, ff::kMetaLenBytes> meta_len;
  stream_.read_exact(meta_len, rest);
  const PayloadLayout layout = accept_meta_len(meta_len);
  // The meta and, where frames are tagged, the opening's tag after it, in one read. (The vector
  // keeps its capacity: no allocation once warmed up.)
  const size_t tag_bytes = check_.tagged() ? kFrameTagBytes : 0;
  meta_.resize(layout.meta_len + tag_bytes);
  stream_.read_exact(meta_, rest);
  check_.open(header_bytes, meta_len, std::span(meta_).first(layout.meta_len), expected_crc_,
              tensor_bytes_ > 0);
  if (check_.tagged()) {
    const auto tag = std::span(meta_).subspan(layout.meta_len);
    std::ranges::copy(tag, check_.missing_tag().begin());
    check_.tag_arrived(tag.size());
    check_.check_opening(stream_.peer(), type_);
  }
  meta_.resize(layout.meta_len);
  if (!handshake) check_tensors_allowed(type_carries_tensors_, stream_.peer(), frame());
  if (tensor_bytes_ == 0) finish_frame(rest);  // the whole frame is in
  return frame();
}

void FrameReader::accept_header(std::span<const std::byte, ff::kHeaderBytes> header_bytes,
                                uint64_t max_payload_bytes, bool handshake) {
  FrameHeader header;
  try {
    header = decode_header(header_bytes, max_payload_bytes);
  } catch (const FrameError& error) {
    throw bad_frame_from(stream_.peer(), error);
  }
  // After the handshake, the link step's reserved types too (Connection judges them).
  const bool allowed =
      handshake ? header.type < ff::kTypeLinkOffer : header.type >= ff::kTypeLinkOffer;
  if (!allowed) {
    throw FrameError(
        fmt::format("bad frame from {}: type {} {}", stream_.peer(), header.type,
                    handshake ? "before the handshake finished" : "is reserved for the handshake"));
  }
  expected_crc_ = header.crc32c;
  type_ = header.type;
  request_id_ = header.request_id;
  payload_len_ = header.payload_len;
}

PayloadLayout FrameReader::accept_meta_len(std::span<const std::byte, ff::kMetaLenBytes> meta_len) {
  PayloadLayout layout;
  try {
    layout = payload_layout(payload_len_, ff::load_le<uint32_t>(meta_len), max_meta_bytes_);
  } catch (const FrameError& error) {
    throw bad_frame_from(stream_.peer(), error);
  }
  tensor_bytes_ = layout.tensor_bytes;
  return layout;
}

IncomingFrame FrameReader::frame() const {
  return IncomingFrame{type_, request_id_, meta_, tensor_bytes_};
}

std::optional<IncomingFrame> FrameReader::try_read(uint64_t max_payload_bytes, bool handshake) {
  const auto header_bytes = std::span(prefix_).first<ff::kHeaderBytes>();
  const auto meta_len = std::span(prefix_).last<ff::kMetaLenBytes>();
  if (!prefix_done_) {
    // The header and the meta length in one read: every payload opens with the meta length,
    // so this never reads past the frame.
    const auto rest = std::span(prefix_).subspan(prefix_have_);
    const size_t n = prefix_have_ == 0 ? stream_.read_available(rest) : read_within_frame(rest);
    prefix_have_ += n;
    bytes_read_ += n;
    // The header is checked as soon as it is in: a stray client's junk may be all it sends.
    if (!header_accepted_ && prefix_have_ >= ff::kHeaderBytes) {
      accept_header(header_bytes, max_payload_bytes, handshake);
      header_accepted_ = true;
    }
    if (prefix_have_ < prefix_.size()) return std::nullopt;
    meta_.resize(accept_meta_len(meta_len).meta_len);
    prefix_done_ = true;
    meta_have_ = 0;
  }
  if (meta_have_ < meta_.size()) {
    const size_t n = read_within_frame(std::span(meta_).subspan(meta_have_));
    meta_have_ += n;
    bytes_read_ += n;
    if (meta_have_ < meta_.size()) return std::nullopt;
  }
  if (!opening_absorbed_) {
    check_.open(header_bytes, meta_len, meta_, expected_crc_, tensor_bytes_ > 0);
    opening_absorbed_ = true;
  }
  if (check_.tagged() && !opening_checked_) {
    const size_t n = read_within_frame(check_.missing_tag());
    check_.tag_arrived(n);
    bytes_read_ += n;
    if (!check_.missing_tag().empty()) return std::nullopt;
    check_.check_opening(stream_.peer(), type_);
    opening_checked_ = true;
  }
  if (!handshake) check_tensors_allowed(type_carries_tensors_, stream_.peer(), frame());
  if (tensor_bytes_ == 0 && !try_finish_frame()) return std::nullopt;  // the CRC is not checked
  prefix_have_ = 0;
  header_accepted_ = false;
  prefix_done_ = false;
  opening_absorbed_ = false;
  opening_checked_ = false;
  tensors_have_ = 0;
  return frame();
}

size_t FrameReader::read_within_frame(std::span<std::byte> into) {
  try {
    return stream_.read_available(into);
  } catch (const PeerClosed&) {
    throw TransportError(
        fmt::format("{} closed the connection in the middle of a frame", stream_.peer()));
  }
}

void FrameReader::read_tensors(std::span<const std::span<float>> into, const IoDeadline& deadline) {
  for (auto tensor : into) read_tensor_bytes(std::as_writable_bytes(tensor), deadline);
  finish_frame(deadline);
}

void FrameReader::discard_tensors(const IoDeadline& deadline) {
  if (tensor_bytes_ > 0 && discard_.empty()) discard_.resize(kReceiveChunkBytes);
  for (uint64_t left = tensor_bytes_; left > 0;) {
    const size_t n = std::min<uint64_t>(left, discard_.size());
    read_tensor_bytes(std::span(discard_).first(n), deadline);
    left -= n;
  }
  finish_frame(deadline);
}

bool FrameReader::try_read_tensors(std::span<float> into) {
  const std::span<std::byte> bytes = std::as_writable_bytes(into);
  while (tensors_have_ < tensor_bytes_) {
    // Capped, so the CRC reads each piece while it is still in cache.
    const size_t want = std::min<uint64_t>(tensor_bytes_ - tensors_have_, kReceiveChunkBytes);
    const auto piece = bytes.subspan(tensors_have_, want);
    const size_t n = read_within_frame(piece);
    check_.absorb(piece.first(n));
    tensors_have_ += n;
    bytes_read_ += n;
    if (n < want) return false;  // the socket is drained; another read would find nothing
  }
  return try_finish_frame();
}

void FrameReader::read_tensor_bytes(std::span<std::byte> into, const IoDeadline& deadline) {
  while (!into.empty()) {
    const auto chunk = into.first(std::min(into.size(), kReceiveChunkBytes));
    stream_.read_exact(chunk, deadline);
    check_.absorb(chunk);
    into = into.subspan(chunk.size());
  }
}

void FrameReader::finish_frame(const IoDeadline& deadline) {
  if (check_.checked()) return;
  if (check_.tagged()) {
    const auto tag = check_.missing_tag();
    stream_.read_exact(tag, deadline);
    check_.tag_arrived(tag.size());
  }
  check_.check(stream_.peer(), type_, request_id_);
}

bool FrameReader::try_finish_frame() {
  if (check_.checked()) return true;
  if (check_.tagged()) {
    const size_t n = read_within_frame(check_.missing_tag());
    check_.tag_arrived(n);
    bytes_read_ += n;
    if (!check_.missing_tag().empty()) return false;
  }
  check_.check(stream_.peer(), type_, request_id_);
  return true;
}

}  // namespace dtrain
