// The receiving half of a connection: one frame at a time (format in comm/frame_format.h), its
// header and meta checked before they are returned (comm/frame_check.h: the CRC, or GMAC tags once
// the handshake has set a key), its tensor bytes read straight into the caller's memory, blocking
// or as far as the socket allows. The mirror of comm/frame_writer.h.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "comm/frame.h"
#include "comm/frame_check.h"
#include "comm/frame_format.h"
#include "comm/frame_mac.h"
#include "comm/tcp_stream.h"

namespace dtrain {

// The protocol's rule (ConnectionOptions::type_carries_tensors, null: any type may) for a frame
// that declares `tensor_bytes`: FrameError naming `peer` where its type may carry none.
void check_tensors_allowed(bool (*type_carries_tensors)(uint16_t), const std::string& peer,
                           const IncomingFrame& frame);

// Thread-safety: one thread (a connection's receiver) uses a reader.
class FrameReader {
 public:
  // A frame announcing a meta block over max_meta_bytes is refused before anything is allocated
  // for it; type_carries_tensors is the protocol's rule, checked before a frame after the
  // handshake is returned.
  FrameReader(TcpStream& stream, uint64_t max_meta_bytes, bool (*type_carries_tensors)(uint16_t))
      : stream_(stream),
        max_meta_bytes_(max_meta_bytes),
        type_carries_tensors_(type_carries_tensors) {}
  FrameReader(const FrameReader&) = delete;
  FrameReader& operator=(const FrameReader&) = delete;

  // Every later frame is checked against tags under `key` in place of the CRC.
  void set_key(const FrameKey& key) { check_.set_key(key); }
  bool tagged() const { return check_.tagged(); }

  // The next frame's header and meta (valid until the next read), authenticated where frames are
  // tagged, and the whole frame checked if it has no tensors. Its first byte may take until
  // `first_byte` (a quiet peer may be idle), the rest must keep coming by `rest`. `handshake`:
  // the handshake's frame types and limits instead of those after it. Throws PeerClosed when the
  // peer closed the connection before the frame's first byte (a normal end), FrameError naming
  // the peer for a frame that breaks the format or fails its check, TransportError otherwise.
  IncomingFrame read(const IoDeadline& first_byte, const IoDeadline& rest,
                     uint64_t max_payload_bytes, bool handshake);
  // The same without blocking: whatever of the frame has arrived, the frame once its opening is
  // in (and, without tensors, its check). PeerClosed only between frames.
  std::optional<IncomingFrame> try_read(uint64_t max_payload_bytes, bool handshake);
  // The frame's tensor bytes into `into`, in order, then its check. REQUIRES: the sizes add up
  // to its tensor bytes (the caller checks, naming its own expectation).
  void read_tensors(std::span<const std::span<float>> into, const IoDeadline& deadline);
  void discard_tensors(const IoDeadline& deadline);
  // What has arrived of them into `into` (the same span at every call); true once all are in
  // and checked.
  bool try_read_tensors(std::span<float> into);

  // Bytes the non-blocking calls have read so far (Connection::bytes_moved).
  uint64_t bytes_read() const { return bytes_read_; }

 private:
  // The checks of a frame's opening, shared by read and try_read: the header's (noting the
  // frame's type, request id, length and CRC), then the meta length's.
  void accept_header(std::span<const std::byte, frame_format::kHeaderBytes> header_bytes,
                     uint64_t max_payload_bytes, bool handshake);
  PayloadLayout accept_meta_len(std::span<const std::byte, frame_format::kMetaLenBytes> meta_len);
  IncomingFrame frame() const;
  void read_tensor_bytes(std::span<std::byte> into, const IoDeadline& deadline);
  // read_available inside a frame, where the peer closing is a failure, not an end.
  size_t read_within_frame(std::span<std::byte> into);
  // Once the whole payload is in: reads the tensors' tag, if frames carry one, and checks the
  // frame (blocking, or as far as the socket allows now: false until the tag is in). FrameError
  // "bad CRC32C from <peer>" or "frame N from <peer> ... failed authentication" if it does not
  // match.
  void finish_frame(const IoDeadline& deadline);
  bool try_finish_frame();

  TcpStream& stream_;
  const uint64_t max_meta_bytes_;
  bool (*const type_carries_tensors_)(uint16_t);

  std::vector<std::byte> meta_;     // reused; grows to the largest meta seen
  std::vector<std::byte> discard_;  // scratch for discard_tensors, allocated on first use
  FrameCheck check_;
  uint32_t expected_crc_ = 0;  // from the frame's header
  uint16_t type_ = 0;
  uint64_t request_id_ = 0;
  uint64_t payload_len_ = 0;
  uint64_t tensor_bytes_ = 0;
  // try_read's progress through a frame: the header and meta length, then the meta, then the
  // tensors.
  std::array<std::byte, frame_format::kHeaderBytes + frame_format::kMetaLenBytes> prefix_{};
  size_t prefix_have_ = 0;
  bool header_accepted_ = false;
  bool prefix_done_ = false;
  size_t meta_have_ = 0;
  bool opening_absorbed_ = false;
  bool opening_checked_ = false;
  uint64_t tensors_have_ = 0;
  uint64_t bytes_read_ = 0;
};

}  // namespace dtrain
