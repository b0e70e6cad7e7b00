// One neighbour of a TCP ring as its progress engine (collective/tcp_ring.h) sees it: the frames
// queued for it and where its incoming frame stands; and the two exchanges a failing rank has with
// it, each bounded by a timeout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "collective/ring_links.h"
#include "comm/connection.h"
#include "comm/meta_codec.h"

namespace dtrain {

struct RingLink {
  enum class Kind { kChunk, kKeepalive, kStall };
  struct Outgoing {
    ConstTypedSpan data;
    ChunkTag tag;
    Kind kind = Kind::kChunk;
  };

  Connection* connection = nullptr;  // set once the ring has formed; owned by RingFormation
  std::vector<Outgoing> queue;       // queue[head..] not yet wholly sent; reused, never shrunk
  size_t head = 0;
  bool head_started = false;  // queue[head] is in start_send / continue_send
  MetaWriter send_meta;       // the meta of queue[head], alive while it is being sent
  bool header_in = false;     // a chunk's header has been read, its tensors not yet
  ChunkTag incoming_tag;      // and this is its tag
  uint64_t incoming_bytes = 0;
  uint8_t incoming_type = 0;  // its ElementType and Codec as the wire has them, checked on recv
  uint8_t incoming_codec = 0;
  bool abort_seen = false;    // this neighbour has stopped and told us why
  uint64_t frames_in = 0;     // frames whose opening has come from this neighbour: it is alive
  bool stall_queued = false;  // a kStall notice waits in the queue, not yet begun
  // The neighbour closed the connection between frames: normal once it has finished, a loss
  // only if we still wait on it (then `closed` says how it went).
  std::string closed;

  bool idle() const { return head == queue.size(); }
  // Nothing queued and, by reference, nothing of ours still to be read: our memory is ours again.
  // Throws FrameError for a neighbour whose acknowledgements make no sense.
  bool settled() const { return idle() && (connection == nullptr || connection->sends_settled()); }

  // Over `to` (this link's connection, or the one formed so far): finishes the frame already on
  // the wire, drops the rest of the queue, and sends a kRingAbort carrying `message`, giving up
  // after timeout_ms. A neighbour that is gone as well is logged, not thrown: the rank beyond it
  // hears of the failure from its own side.
  void send_abort(Connection& to, std::string_view message, int timeout_ms);
  // The neighbour may still be sending to us: reads and discards until its own abort arrives,
  // its link closes, or timeout_ms, so that it learns the real culprit rather than finding this
  // rank gone.
  void drain(Connection& from, int timeout_ms);
};

}  // namespace dtrain
