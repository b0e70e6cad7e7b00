// A received frame's CRC or tags, checked as its bytes arrive.
#include "comm/frame_check.h"

#include <fmt/format.h>

#include "base/crc32c.h"
#include "base/error.h"
#include "comm/frame.h"

namespace dtrain {

void FrameCheck::open(std::span<const std::byte, frame_format::kHeaderBytes> header,
                      std::span<const std::byte, frame_format::kMetaLenBytes> meta_len,
                      std::span<const std::byte> meta, uint32_t expected_crc, bool has_tensors) {
  checked_ = false;
  tag_have_ = 0;
  expected_crc_ = expected_crc;
  if (mac_) {
    frame_number_ = frames_received_++;
    mac_->begin(frame_number_, FramePart::kOpening);
    mac_->update(header);
  } else {
    crc_ = header_crc(header);
  }
  absorb(meta_len);
  absorb(meta);
  has_tensors_ = has_tensors;
}

void FrameCheck::check_opening(const std::string& peer, uint16_t claimed_type) {
  if (!mac_->verify(tag_)) {
    // Nothing in the opening is trusted, so its type and request are not named as facts.
    throw FrameError(fmt::format(
        "frame {} from {} failed authentication (its header and meta, claiming type {}): it was "
        "altered, forged, replayed, reordered or cut short on the way, or the sender does not "
        "hold the cluster secret",
        frame_number_, peer, claimed_type));
  }
  tag_have_ = 0;
  if (!has_tensors_) {
    checked_ = true;
  } else {
    mac_->begin(frame_number_, FramePart::kTensors);
  }
}

void FrameCheck::absorb(std::span<const std::byte> bytes) {
  if (mac_) {
    mac_->update(bytes);
  } else {
    crc_ = crc32c(bytes, crc_);
  }
}

void FrameCheck::check(const std::string& peer, uint16_t type, uint64_t request_id) {
  checked_ = true;
  if (mac_) {
    if (!mac_->verify(tag_)) {
      throw FrameError(fmt::format(
          "frame {} from {} (type {}, request {}) failed authentication in its tensors: they were "
          "altered or cut short on the way, or the sender does not hold the cluster secret",
          frame_number_, peer, type, request_id));
    }
    return;
  }
  if (crc_ != expected_crc_) {
    throw FrameError(fmt::format(
        "bad CRC32C from {} (frame type {}, request {}): computed 0x{:08X}, header says 0x{:08X}",
        peer, type, request_id, crc_, expected_crc_));
  }
}

}  // namespace dtrain
