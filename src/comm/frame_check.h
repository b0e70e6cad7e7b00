// The receiving half's check of each frame (format in comm/frame_format.h): a CRC-32C over the
// whole frame, as its header says, or, once the handshake has set a key, GMAC tags over its
// opening and over its tensors (comm/frame_mac.h), fed the frame's bytes as they arrive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "comm/frame_format.h"
#include "comm/frame_mac.h"

namespace dtrain {

// A frame's check, in order: open(), then where frames are tagged the opening's tag
// (missing_tag / tag_arrived) and check_opening(); then absorb() over the tensors; then the
// tensors' tag, if tagged, and check(). Thread-safety: one thread (a connection's receiver).
class FrameCheck {
 public:
  // Every later frame is checked against tags under `key` in place of the CRC.
  void set_key(const FrameKey& key) { mac_ = std::make_unique<FrameMac>(key); }
  bool tagged() const { return mac_ != nullptr; }

  // A frame's opening is in: starts its check over the header (whose CRC field said
  // `expected_crc`), the meta length and the meta.
  void open(std::span<const std::byte, frame_format::kHeaderBytes> header,
            std::span<const std::byte, frame_format::kMetaLenBytes> meta_len,
            std::span<const std::byte> meta, uint32_t expected_crc, bool has_tensors);
  // Where frames are tagged: the bytes of the tag now awaited (the opening's, then the
  // tensors') that have not arrived, to be read into, and how many did.
  std::span<std::byte> missing_tag() { return std::span(tag_).subspan(tag_have_); }
  void tag_arrived(size_t n) { tag_have_ += n; }
  // Once the opening's tag is in: FrameError naming `peer` if it fails; else the frame is checked
  // if it has no tensors, and the tensors' tag is awaited if it has.
  void check_opening(const std::string& peer, uint16_t claimed_type);
  // The frame's next tensor bytes.
  void absorb(std::span<const std::byte> bytes);
  // Once the whole frame and its last tag are in: FrameError "bad CRC32C from <peer>" or
  // "frame N from <peer> ... failed authentication" if it does not match.
  void check(const std::string& peer, uint16_t type, uint64_t request_id);
  // The frame's CRC or last tag has been checked.
  bool checked() const { return checked_; }

 private:
  std::unique_ptr<FrameMac> mac_;
  uint64_t frames_received_ = 0;  // where frames are tagged: the next frame's number
  uint64_t frame_number_ = 0;     // of the frame being checked
  uint32_t crc_ = 0;              // CRC-32C of the frame so far
  uint32_t expected_crc_ = 0;     // from its header
  FrameTag tag_{};                // the opening's tag, then the tensors', as each arrives
  size_t tag_have_ = 0;
  bool has_tensors_ = false;
  bool checked_ = false;
};

}  // namespace dtrain
