// RingLinks over comm/, the progress engine: once the ring has formed (collective/ring_formation.h:
// hello, checks, refusals, by-reference links), each connection carries frames both ways (the ring
// algorithms use it one way, halving-doubling both). The calling thread drives both connections
// without blocking on either (the progress loop of MPI implementations): while it waits for a
// chunk from one neighbour, queued chunks flow out, with no thread hand-offs on the hot path.
//
// Between ranks of one host (--transport auto, the default, or shm) the connection moves a chunk
// by reference (comm/memory_link.h): the receiver copies it straight out of the sender's memory
// and acknowledges it, which is what wait_sent() then waits for, all through a page the two ranks
// share, with no system call; a rank that sleeps is woken by a frame. The engine sees the same
// non-blocking calls either way; keepalives, aborts and a closed connection still cross the
// socket, so failure detection is the same on both.
//
// Failure: the first rank to find a neighbour lost (connection closed) or stuck (no byte for
// timeout_ms, while the ranks that are merely waiting send keepalives) stops with a
// CollectiveError naming it, and sends an abort with that message to its other neighbour; each
// rank passes it on, so every rank stops with the same message instead of waiting for its own
// timeout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/stop_request.h"
#include "collective/ring_connector.h"
#include "collective/ring_formation.h"
#include "collective/ring_link.h"
#include "collective/ring_links.h"
#include "collective/ring_stall.h"
#include "comm/connection.h"
#include "comm/host_port.h"
#include "comm/meta_codec.h"

namespace dtrain {

// Thread-safety: one thread makes every call except port() and rank_name().
class TcpRing final : public RingLinks {
 public:
  // Listens for the left neighbour (size > 1). Throws TransportError if it cannot listen.
  explicit TcpRing(RingOptions options);
  ~TcpRing() override;
  TcpRing(const TcpRing&) = delete;
  TcpRing& operator=(const TcpRing&) = delete;

  uint16_t port() const;

  // Forms the ring (RingFormation::connect, which says what it throws). Every rank must call it.
  // REQUIRES: not yet connected.
  void connect(const HostPort& right);

  int rank() const override { return options_.rank; }
  int size() const override { return options_.size; }
  void send(Side to, ConstTypedSpan data, ChunkTag tag) override;
  void recv(Side from, TypedSpan into, ChunkTag tag) override;
  void wait_sent() override;

  // Both neighbours are told `reason`, and pass it on.
  void abort(std::string_view reason) override;
  std::string describe_link(Side side) const override;
  void note(const CollectiveNote& collective) override { note_ = collective; }

  std::string rank_name(int rank) const { return formation_.rank_name(rank); }  // "worker3"

  // Whether chunks to and from the neighbour on `side` are copied out of the sender's memory
  // rather than sent over the socket, announced through a page the two share (a by-reference
  // link always has one). REQUIRES: connected.
  bool reads_memory(Side side) const { return connection(side).link_traits().in_memory; }
  bool shares_mailbox(Side side) const { return reads_memory(side); }

 private:
  // What a progress loop waits for.
  enum class Want { kChunk, kSent };

  int left_rank() const;
  int right_rank() const;
  int rank_on(Side side) const { return side == Side::kLeft ? left_rank() : right_rank(); }
  Connection& connection(Side side) const { return *link(side).connection; }
  // The connection to `side` as far as the ring has formed (null before), for failure paths.
  Connection* reached(Side side);
  RingLink& link(Side side) { return side == Side::kLeft ? left_link_ : right_link_; }
  const RingLink& link(Side side) const { return side == Side::kLeft ? left_link_ : right_link_; }
  // The progress loop: moves bytes both ways on both links until `want` holds; throws
  // CollectiveError naming the neighbour at fault. For kChunk, the chunk `tag` comes from `from`
  // into `into`.
  void progress(Want want, Side from, TypedSpan into, ChunkTag tag);
  // Writes queued frames to `side` as far as the socket takes them; returns whether a byte moved.
  // A lost neighbour is a CollectiveError naming it.
  bool pump_sends(Side side);
  // Reads what has arrived of the expected chunk; returns true once it is all in. Throws the
  // failure a kRingAbort carries, or CollectiveError for a chunk the ranks disagree on.
  bool pump_receive(Side from, TypedSpan into, ChunkTag tag);
  // Reads the next frame's opening from `side` if one has arrived, handling keepalives and
  // aborts; returns true once a chunk's header is in (RingLink::header_in).
  bool read_header(Side side);
  // A read from `side` failed: a neighbour that closed between frames is noted (RingLink::closed),
  // anything else fails the ring naming it.
  void lost_while_reading(Side side, const TransportError& error);
  // A link to `side` failed: a neighbour whose frames or mailbox make no sense (FrameError naming
  // it) fails the ring telling every neighbour still reachable; any other error is a loss.
  [[noreturn]] void fail_link(Side side, const TransportError& error);
  // Whether the neighbour on `side` has every chunk we sent it (throws as fail_link).
  bool settled(Side side);
  [[noreturn]] void fail_mismatch(Side from, ChunkTag got, uint64_t got_bytes, ChunkTag tag,
                                  uint64_t bytes);
  // The chunk `tag` from `from` is not of the element type or codec `into` expects.
  [[noreturn]] void fail_encoding(Side from, ChunkTag tag, TypedSpan into);
  // The wait has lasted past the stall warning (collective/ring_stall.h): reports it, naming the
  // neighbour waited on (`from`, or the first that has not taken our chunks), silent since
  // `heard`, and tells the neighbours what is new.
  void report_stall(SteadyClock::time_point now, const Side* from, const bool settled[2],
                    const SteadyClock::time_point heard[2], ChunkTag tag);
  // A kRingStall notice from a neighbour, read during a wait.
  void take_stall_notice(std::span<const std::byte> meta);
  // Queues this rank's notice for every neighbour but the culprit.
  void send_stall_notices();
  // Sleeps until a neighbour can move bytes, or `until`. Watches the link `reading` and every
  // other link that is not holding a chunk back for later, so that an abort is seen at once.
  void wait_for_io(const Side* reading, SteadyClock::time_point until);

  // Failure: records `message` (the first one wins), tells every neighbour but the one whose link
  // broke, then reads on until each of them has stopped too, and throws it as a CollectiveError.
  [[noreturn]] void fail(const std::string& message, std::optional<Side> broken);
  // "lost worker2: <what> (seen by worker3)", thrown through fail().
  [[noreturn]] void fail_lost(Side side, std::string_view what);
  // RingLink::send_abort and RingLink::drain on the link to `side`, as far as it has formed.
  void send_abort(Side side, const std::string& message);
  void drain(Side side);
  void throw_if_failed() const;
  [[noreturn]] void interrupted();  // RingOptions::interrupt was raised past this ring's view
  std::string lost_message(int peer, std::string_view what) const;

  const RingOptions options_;
  RingFormation formation_;  // before the links: their connections are its
  RingLink left_link_;
  RingLink right_link_;
  std::exception_ptr failure_;  // the first failure, a CollectiveError
  StallWatch stall_;
  CollectiveNote note_;  // the collective under way
  uint64_t op_ = 0;      // its number, as the last chunk sent or awaited says
};

}  // namespace dtrain
