// The sending half of a connection: one frame at a time (format in comm/frame_format.h) laid out
// as pieces straight from the caller's memory, with its CRC in the header or, once the handshake
// has set a key, GMAC tags (comm/frame_mac.h), and written whole or as far as the socket takes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "comm/frame_format.h"
#include "comm/frame_mac.h"
#include "comm/tcp_stream.h"

namespace dtrain {

// Thread-safety: one thread (a connection's sender) uses a writer.
class FrameWriter {
 public:
  // Frames over these limits are refused here (FrameError naming the peer): the peer would refuse
  // them, and failing here names the real culprit, this sender.
  FrameWriter(TcpStream& stream, uint64_t max_meta_bytes, uint64_t max_payload_bytes)
      : stream_(stream), max_meta_bytes_(max_meta_bytes), max_payload_bytes_(max_payload_bytes) {}
  FrameWriter(const FrameWriter&) = delete;
  FrameWriter& operator=(const FrameWriter&) = delete;

  // Every later frame is tagged with `key` in place of the CRC.
  void set_key(const FrameKey& key) { mac_ = std::make_unique<FrameMac>(key); }
  bool tagged() const { return mac_ != nullptr; }

  // Writes a whole frame, blocking: the meta block, then each tensor's floats in order, gathered
  // into as few writes as the tags allow (nothing is copied).
  void write(uint16_t type, uint64_t request_id, std::span<const std::byte> meta,
             std::span<const std::span<const float>> tensors, const IoDeadline& deadline);
  // Lays a frame out for pump(); meta and tensors are referenced, not copied, and must stay valid
  // until pump() returns true. REQUIRES: !busy().
  void start(uint16_t type, uint64_t request_id, std::span<const std::byte> meta,
             std::span<const std::span<const float>> tensors);
  // Writes what the socket takes of the frame started, adding the bytes to `bytes_moved`; true
  // once all of it is written (and when none is under way).
  bool pump(uint64_t& bytes_moved);
  // A started frame is not yet wholly written.
  bool busy() const { return busy_; }

 private:
  // Checks a frame against the limits, and lays it out in pieces_ with its CRC in the header, or,
  // where frames are tagged, with the opening's tag after the meta and, if tag_tensors_now, the
  // tensors' tag as the last piece.
  void prepare(uint16_t type, uint64_t request_id, std::span<const std::byte> meta,
               std::span<const std::span<const float>> tensors, bool tag_tensors_now);

  TcpStream& stream_;
  const uint64_t max_meta_bytes_;
  const uint64_t max_payload_bytes_;
  std::unique_ptr<FrameMac> mac_;
  uint64_t frames_sent_ = 0;  // where frames are tagged: the next frame's number

  // The frame being written, its pieces reused so that write() does not allocate.
  std::vector<std::span<const std::byte>> pieces_;
  std::array<std::byte, frame_format::kHeaderBytes> header_{};
  std::array<std::byte, frame_format::kMetaLenBytes> meta_len_{};
  uint64_t frame_number_ = 0;  // of the frame being written, where frames are tagged
  FrameTag opening_tag_{};
  FrameTag tensor_tag_{};
  std::vector<std::span<const std::byte>> batch_;  // write(): the pieces of one write
  size_t piece_ = 0;                               // start: the first piece not wholly written
  size_t offset_ = 0;                              // and the bytes of it that are
  bool busy_ = false;
};

}  // namespace dtrain
