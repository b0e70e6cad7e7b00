// One neighbour of a TCP ring as its progress engine (collective/tcp_ring.h) sees it: the frames
// queued for it, where its incoming frame stands, the chunks it announced by reference; and the
// two exchanges a failing rank has with it, each bounded by a timeout.
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
#include "comm/shared_mailbox.h"

namespace dtrain {

struct RingLink {
  enum class Kind { kChunk, kKeepalive, kRead };
  struct Outgoing {
    std::span<const float> data;
    ChunkTag tag;
    Kind kind = Kind::kChunk;  // kRead: a kRingChunkRead for the oldest chunk read from that side
  };
  // A chunk a neighbour announced by reference and that has not been read yet.
  struct ChunkRef {
    ChunkTag tag;
    uint64_t address = 0;
    uint64_t bytes = 0;
  };

  Connection* connection = nullptr;  // set once the ring has formed; owned by RingFormation
  std::vector<Outgoing> queue;       // queue[head..] not yet wholly sent; reused, never shrunk
  size_t head = 0;
  bool head_started = false;  // queue[head] is in start_send / continue_send
  MetaWriter send_meta;       // the meta of queue[head], alive while it is being sent
  bool header_in = false;     // a chunk's header has been read, its tensors not yet
  ChunkTag incoming_tag;      // and this is its tag
  uint64_t incoming_bytes = 0;
  bool abort_seen = false;  // this neighbour has stopped and told us why
  // The neighbour closed the connection between frames: normal once it has finished, a loss
  // only if we still wait on it (then `closed` says how it went).
  std::string closed;
  // FormedLink's: chunks move by reference on this link, read from the memory of process
  // peer_pid; announced through `mailbox` when there is one, in frames otherwise.
  bool by_reference = false;
  int32_t peer_pid = 0;
  std::unique_ptr<SharedMailbox> mailbox;
  uint64_t acknowledged = 0;   // of our chunks, by the neighbour, as last read from the mailbox
  uint64_t unread = 0;         // chunks we sent by reference that the neighbour has not read
  std::vector<ChunkRef> refs;  // refs[ref_head..]: announced to us, not read yet
  size_t ref_head = 0;

  bool idle() const { return head == queue.size(); }
  // Nothing queued and nothing of ours still to be read: our memory is ours again.
  bool settled() const { return idle() && unread == 0; }

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

// A chunk reference as a mailbox record (the fields of kRingChunkRef's meta), and back.
SharedMailbox::Record chunk_record(ChunkTag tag, std::span<const float> data);
RingLink::ChunkRef chunk_ref(const SharedMailbox::Record& record);

}  // namespace dtrain
