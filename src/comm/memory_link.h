// A connection's payloads by reference, once the link step (comm/link_setup.h) has chosen them:
// what a frame with tensors carries in their place, how the receiver copies them straight out of
// the sender's memory (comm/peer_memory.h, one copy) and acknowledges, and how the frames that go
// through the shared mailbox (comm/shared_mailbox.h) and those that go over the socket keep the
// order they were sent in. Connection (comm/connection.h) drives it; protocols never see it.
//
// On such a link no tensor byte crosses the socket. A frame with one tensor and a meta block of at
// most kRecordMetaBytes is a mailbox record, with no system call on either side:
//
//   type u16 | meta_len u16 << 16 | flags << 32 | request_id | frames_before | address | bytes |
//   meta (3 words)
//
// Any other frame goes over the socket as usual, with 0 tensor bytes, its meta block followed by a
// trailer that its opening tag authenticates with the rest:
//
//   meta | (address u64, bytes u64) per tensor | tensor count u32 | records_before u64
//
// frames_before and records_before count what the sender had sent the other way before it, so the
// receiver delivers both in the sender's order. The receiver acknowledges every frame with tensors,
// in order, through the mailbox once it has copied them: the sender's memory is its own again.
// A peer asleep on its socket (it said so in the mailbox) is woken by a kTypeWake frame.
//
// A receiver that knows where its next tensor of a size goes may offer that place (a landing
// record: flag kLanding, address, bytes). The sender's next record-sized frame with one tensor of
// exactly that size is then written straight into it (comm/peer_memory.h) and flagged kLanded:
// it needs no acknowledgement, so the sender's memory is its own again at once, and the receiver
// has nothing to copy. Landings are used in the order offered; a frame of another size leaves
// them be. This is what lets a ps answer a worker's push with the shard's values under the
// shard's lock without keeping it locked while the worker copies.
//
// The mailbox is shared only with the process that proved, in the link step, that it holds the
// other end of this authenticated connection, so its records are as authentic as that proof. Their
// counters and references are checked all the same: nonsense is a FrameError naming the peer.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "comm/frame.h"
#include "comm/shared_mailbox.h"

namespace dtrain {

class Connection;

// Thread-safety: as Connection's: its sender thread makes the sending calls, its receiver thread
// the receiving ones (begin_wait / end_wait belong to the thread that drives the non-blocking
// calls); they share only the mailbox, whose two directions are independent, and the writer, for
// wake frames, under Connection::write_mutex_.
class MemoryLink {
 public:
  static constexpr size_t kRecordMetaBytes = 24;

  // `peer` names the peer process in errors.
  MemoryLink(int32_t peer_pid, std::unique_ptr<SharedMailbox> mailbox, std::string peer);

  int32_t peer_pid() const { return peer_pid_; }

  // ---- Connection's calls on a by-reference link, with its contracts (comm/connection.h). It has
  // checked its state, the frame type and the tensor sizes, and runs these under its failure rule.
  void send(Connection& c, uint16_t type, uint64_t request_id, std::span<const std::byte> meta,
            std::span<const std::span<const float>> tensors);
  void start_send(Connection& c, uint16_t type, uint64_t request_id,
                  std::span<const std::byte> meta, std::span<const std::span<const float>> tensors);
  bool continue_send(Connection& c);
  // Connection::offer_landing: a record telling the peer where our next frame's tensor of
  // `into`'s size may be written (comm/peer_memory.h's write), instead of being copied out of its
  // memory by us. Sender thread.
  void offer_landing(Connection& c, std::span<float> into);
  // send's two halves: the frame out, then the wait for the peer to have copied every tensor.
  void post(Connection& c, uint16_t type, uint64_t request_id, std::span<const std::byte> meta,
            std::span<const std::span<const float>> tensors);
  void settle(Connection& c);
  IncomingFrame receive(Connection& c);
  std::optional<IncomingFrame> try_receive(Connection& c);
  // Copies the frame's tensors out of the peer's memory into `into` and acknowledges them; a
  // peer whose process has gone is lost as if it had closed the connection (PeerProcessGone, which
  // Connection counts so). FrameError naming it for a reference outside its memory.
  void receive_tensors(Connection& c, std::span<const std::span<float>> into);
  // Acknowledges the frame's tensors unread.
  void discard_tensors(Connection& c);

  // Whether a frame from the peer (a record, or one read ahead) is waiting to be received; the
  // socket's own are Connection's to see.
  bool input_waiting() {
    return lookahead_ || stashed_ || mailbox_->has_news(SharedMailbox::kForRecords);
  }
  // Whether the peer has acknowledged every frame with tensors sent so far.
  bool sends_settled();
  uint64_t acknowledged() const { return acknowledged_; }
  // Connection::begin_wait / end_wait: `reasons` (SharedMailbox::kForRecords, kForAcks) say what
  // the waiter waits for, so that the peer wakes it for that only.
  bool begin_wait(unsigned reasons = SharedMailbox::kForRecords | SharedMailbox::kForAcks);
  void end_wait(unsigned reasons = SharedMailbox::kForRecords | SharedMailbox::kForAcks);

 private:
  struct Ref {
    uint64_t address = 0;
    uint64_t bytes = 0;
  };
  // Landings offered by the peer and not used yet, at most this many.
  static constexpr size_t kMaxLandings = 4096;

  // What a frame becomes on the way out: a record to try_post(), or a socket frame with `meta` (the
  // caller's and the trailer, valid until the next prepare) and no tensors.
  struct Outgoing {
    bool as_record = false;
    std::span<const std::byte> meta;
  };
  Outgoing prepare(uint16_t type, uint64_t request_id, std::span<const std::byte> meta,
                   std::span<const std::span<const float>> tensors);
  // Posts the record prepared; false while the mailbox is full.
  bool try_post();
  // The peer's oldest landing, taken, if it is for a tensor of `bytes`.
  std::optional<Ref> use_landing(uint64_t bytes);
  void write_to_landing(const Ref& landing, std::span<const float> tensor);
  // The peer's next frame record, if it is the next thing the peer sent (no socket frame before
  // it), keeping the landings it offered before it.
  std::optional<IncomingFrame> take_record();
  IncomingFrame take_frame_record();  // REQUIRES: lookahead_ is a frame's record, next in order
  // A socket frame's meta, just authenticated: strips and checks its trailer. The frame is next
  // in order if in_order(); otherwise a record is.
  IncomingFrame accept_frame(const IncomingFrame& wire);
  bool in_order() const { return frame_records_before_ == records_taken_; }
  // The socket frame accepted last is delivered: its tensors are the ones to read.
  void frame_delivered();
  IncomingFrame deliver(Connection& c, const IncomingFrame& frame);
  // The stashed socket frame if it is next in order, else the record that is. FrameError if
  // neither is: the peer sent it before records it says came first.
  IncomingFrame deliver_stashed(Connection& c);
  void read_tensors(std::span<const std::span<float>> into);
  void acknowledge(Connection& c);
  // A peer asleep on its socket after we posted or acknowledged gets a kTypeWake frame, now if
  // the writer is free, else from whoever holds it once its frame is out.
  // `reason`: what we did, SharedMailbox::kForRecords (posted) or kForAcks (acknowledged); 0 to
  // write only a wake left pending.
  void wake_peer(Connection& c, unsigned reason);
  void write_wake(Connection& c, unsigned reason);  // REQUIRES: write_mutex_ held, writer free
  // One turn of a blocking call's wait that `began` then: a yield while it is short, else a sleep
  // on the socket for news, at most one slice. Throws TransportError once `until` (if set) has
  // passed, naming the peer and `what` it did not do, or when the peer's process has gone.
  void wait(Connection& c, std::chrono::steady_clock::time_point began,
            std::optional<std::chrono::steady_clock::time_point> until, const char* what,
            unsigned reasons);
  [[noreturn]] void insane(const std::string& what) const;

  const int32_t peer_pid_;
  const std::unique_ptr<SharedMailbox> mailbox_;
  const std::string peer_;

  // Sender's.
  std::vector<std::byte> send_meta_;  // a socket frame's meta and trailer
  SharedMailbox::Record record_;      // the record prepared
  bool record_needs_ack_ = false;     // it references our memory (not landed, not a landing)
  bool post_pending_ = false;         // start_send's record, not yet posted
  uint64_t frames_sent_ = 0;          // over the socket
  uint64_t records_posted_ = 0;
  uint64_t by_reference_sent_ = 0;  // frames with tensors, posted or sent
  uint64_t acknowledged_ = 0;       // of those, by the peer, as last read

  // Landings: the peer's, taken by the receiver and used by the sender; ours, offered by the
  // sender and checked off by the receiver as frames arrive written into them.
  std::mutex landings_mutex_;
  std::deque<Ref> landings_;  // guarded by landings_mutex_
  std::deque<Ref> offered_;   // guarded by landings_mutex_

  // Receiver's.
  std::optional<SharedMailbox::Record> lookahead_;  // taken, not yet next in order
  std::vector<std::byte> record_meta_;
  std::vector<Ref> refs_;        // the delivered frame's tensors
  bool landed_ = false;          // the delivered frame's tensor is in our landing already
  std::vector<Ref> frame_refs_;  // the socket frame accepted last, until it is delivered
  uint64_t frame_tensor_bytes_ = 0;
  uint64_t frame_records_before_ = 0;
  std::optional<IncomingFrame> stashed_;  // a socket frame whose earlier records come first
  uint64_t records_taken_ = 0;
  uint64_t frames_delivered_ = 0;
  // Threads in begin_wait .. end_wait, for records and for acknowledgements (a blocking sender
  // and the receiver may both sleep on the socket): the mailbox says what this side sleeps for
  // while any does.
  std::mutex sleep_mutex_;
  int sleepers_[2] = {};  // guarded by sleep_mutex_
};

}  // namespace dtrain
