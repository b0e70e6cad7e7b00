// The only view of the network that the collective algorithms get (DESIGN.md §6): this rank's
// place in a ring, a queue of messages to each neighbour and blocking receives from each. The ring
// algorithms send right and receive left; halving-doubling on four ranks exchanges with either
// neighbour (collective/halving_doubling.h). collective/tcp_ring.h implements it over comm/,
// collective/memory_ring.h in one process; collective/ring_connector.h hands out either. A message
// is bytes with their element type (tensor/typed_span.h): the links move both and check the type,
// while the algorithms, which sum float32, pass float spans.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "tensor/typed_span.h"

namespace dtrain {

// Names one message of one collective. Every rank numbers its collectives the same way, so a
// receiver that finds another tag knows the ranks have fallen out of step and says so.
struct ChunkTag {
  uint64_t op = 0;     // which collective, counted from 0 on every rank
  uint32_t step = 0;   // the algorithm's step
  uint32_t chunk = 0;  // the chunk within the step
  bool operator==(const ChunkTag&) const = default;
};

std::string to_string(const ChunkTag& tag);  // "op 3 step 1 chunk 0"

// What a collective is, for a rank that reports a stalled wait (collective/ring_stall.h): kept,
// not formatted, so that the hot path pays nothing for it.
struct CollectiveNote {
  const char* kind = "collective";  // "all-reduce", "broadcast", "all-gather"
  uint64_t bytes = 0;
  int bucket = -1;  // which of the strategy's gradient buckets; -1: none
};

enum class Side { kLeft, kRight };

inline Side opposite(Side side) { return side == Side::kLeft ? Side::kRight : Side::kLeft; }

class RingLinks {
 public:
  virtual ~RingLinks() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Queues `data` for the neighbour on side `to` and returns at once; messages to one side leave
  // in the order queued. `data` must stay valid and unchanged until that neighbour has received
  // it, which a rank knows either causally (a message that depends on it) or from wait_sent().
  // REQUIRES: size() > 1.
  virtual void send(Side to, ConstTypedSpan data, ChunkTag tag) = 0;

  // Blocks until the next message from the neighbour on side `from` has been written into `into`.
  // Throws CollectiveError when that message is not `tag`, not of into.type() or not
  // into.size_bytes() long (naming the neighbour, the tag, and both types or lengths), or when the
  // ring has failed (a lost or stuck rank, named in the message). REQUIRES: size() > 1.
  virtual void recv(Side from, TypedSpan into, ChunkTag tag) = 0;

  void send_right(ConstTypedSpan data, ChunkTag tag) { send(Side::kRight, data, tag); }
  void recv_left(TypedSpan into, ChunkTag tag) { recv(Side::kLeft, into, tag); }

  // Blocks until every queued message has been handed to the transport; throws as recv_left if
  // the ring failed.
  virtual void wait_sent() = 0;

  // Stops this rank's part in the ring: every rank still in it is told `reason` (which should name
  // this rank's failure) and stops with it, and every later call here throws. Idempotent; the
  // first reason wins.
  virtual void abort(std::string_view reason) = 0;

  // How chunks travel to and from the neighbour on `side`, for the start-up report: "tcp", "shm
  // (...)", "memory". REQUIRES: size() > 1.
  virtual std::string describe_link(Side side) const = 0;

  // The collective that the next sends and receives belong to, for reports of a stalled wait.
  virtual void note(const CollectiveNote& /*collective*/) {}
};

}  // namespace dtrain
