// Frames out, blocking or a step at a time.
#include "comm/frame_writer.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/crc32c.h"
#include "base/error.h"
#include "comm/frame.h"

namespace dtrain {

namespace ff = frame_format;

namespace {

// A frame whose tag is computed as it is sent goes out in writes of at most this size: a ps shard
// (1 MiB by default) in one write, as with a CRC. Smaller writes let the peer check one while the
// next is tagged, but each costs a wake-up of the peer: 256 KiB made ps training 20% slower.
constexpr size_t kSendBatchBytes = size_t{1} << 20;
// A tagged frame's first pieces: header, meta length, meta and the opening's tag.
constexpr size_t kTaggedOpeningPieces = 4;

}  // namespace

void FrameWriter::write(uint16_t type, uint64_t request_id, std::span<const std::byte> meta,
                        std::span<const std::span<const float>> tensors,
                        const IoDeadline& deadline) {
  prepare(type, request_id, meta, tensors, /*tag_tensors_now=*/false);
  if (!mac_ || pieces_.size() == kTaggedOpeningPieces) {
    stream_.write_all(pieces_, deadline);
    return;
  }
  // The tensors are tagged as they go out, a batch at a time: for a frame of several batches, the
  // peer reads and checks one while we tag the next.
  mac_->begin(frame_number_, FramePart::kTensors);
  std::vector<std::span<const std::byte>>& batch = batch_;
  batch.clear();
  size_t batch_bytes = 0;
  for (size_t i = 0; i < pieces_.size(); ++i) {
    std::span<const std::byte> piece = pieces_[i];
    while (!piece.empty()) {
      const auto part = piece.first(std::min(piece.size(), kSendBatchBytes - batch_bytes));
      if (i >= kTaggedOpeningPieces) mac_->update(part);
      batch.push_back(part);
      batch_bytes += part.size();
      piece = piece.subspan(part.size());
      if (batch_bytes == kSendBatchBytes) {
        stream_.write_all(batch, deadline);
        batch.clear();
        batch_bytes = 0;
      }
    }
  }
  tensor_tag_ = mac_->tag();
  batch.push_back(tensor_tag_);
  stream_.write_all(batch, deadline);
}

void FrameWriter::prepare(uint16_t type, uint64_t request_id, std::span<const std::byte> meta,
                          std::span<const std::span<const float>> tensors, bool tag_tensors_now) {
  uint64_t tensor_bytes = 0;
  for (auto tensor : tensors) tensor_bytes += tensor.size_bytes();
  const uint64_t payload_len = ff::kMetaLenBytes + meta.size() + tensor_bytes;
  // The peer would refuse these; failing here names the real culprit, this sender.
  if (meta.size() > max_meta_bytes_ || meta.size() > UINT32_MAX) {
    throw FrameError(fmt::format("a {}-byte meta block for {} is over the {}-byte limit",
                                 meta.size(), stream_.peer(), max_meta_bytes_));
  }
  if (payload_len > max_payload_bytes_) {
    throw FrameError(fmt::format("a frame of {} payload bytes for {} is over the {}-byte limit",
                                 payload_len, stream_.peer(), max_payload_bytes_));
  }
  encode_header({.type = type, .request_id = request_id, .payload_len = payload_len}, header_);
  ff::store_le(meta_len_, static_cast<uint32_t>(meta.size()));

  pieces_.clear();
  pieces_.push_back(header_);
  pieces_.push_back(meta_len_);
  pieces_.push_back(meta);

  if (mac_) {
    // The opening's tag follows the meta and covers the header (crc32c 0), meta length and meta.
    frame_number_ = frames_sent_++;
    mac_->begin(frame_number_, FramePart::kOpening);
    for (auto piece : pieces_) mac_->update(piece);
    opening_tag_ = mac_->tag();
    pieces_.push_back(opening_tag_);
    if (tensor_bytes == 0) return;
    for (auto tensor : tensors) pieces_.push_back(std::as_bytes(tensor));
    if (!tag_tensors_now) return;
    mac_->begin(frame_number_, FramePart::kTensors);
    for (auto tensor : tensors) mac_->update(std::as_bytes(tensor));
    tensor_tag_ = mac_->tag();
    pieces_.push_back(tensor_tag_);
    return;
  }
  for (auto tensor : tensors) pieces_.push_back(std::as_bytes(tensor));
  // The CRC leads the frame but covers all of it, so it is chained over the pieces before any
  // byte is written; the pieces then go out in one gathered write.
  uint32_t crc = header_crc(header_);
  for (auto piece : std::span(pieces_).subspan(1)) crc = crc32c(piece, crc);
  ff::store_le(std::span(header_).subspan(ff::kCrcOffset), crc);
}

void FrameWriter::start(uint16_t type, uint64_t request_id, std::span<const std::byte> meta,
                        std::span<const std::span<const float>> tensors) {
  prepare(type, request_id, meta, tensors, /*tag_tensors_now=*/true);
  piece_ = 0;
  offset_ = 0;
  busy_ = true;
}

bool FrameWriter::pump(uint64_t& bytes_moved) {
  if (!busy_) return true;
  size_t written = stream_.write_available(std::span(pieces_).subspan(piece_), offset_);
  bytes_moved += written;
  // Advance over what was written, which may end inside any piece; empty pieces are passed.
  while (piece_ < pieces_.size()) {
    const size_t left = pieces_[piece_].size() - offset_;
    if (written < left) {
      offset_ += written;
      break;
    }
    written -= left;
    ++piece_;
    offset_ = 0;
  }
  busy_ = piece_ < pieces_.size();
  return !busy_;
}

}  // namespace dtrain
