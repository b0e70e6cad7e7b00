// A rank's collectives over its ring, numbered so that every rank can check that it runs the same
// sequence of them as its neighbours. Owns the scratch buffer, so a collective allocates nothing
// once the largest chunk has been seen.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "collective/ring_allreduce.h"
#include "collective/ring_links.h"
#include "tensor/typed_span.h"

namespace dtrain {

enum class AllreduceAlgorithm {
  kAuto,             // halving-doubling where it fits and the buffer is small enough, else ring
  kRing,             // collective/ring_allreduce.h
  kHalvingDoubling,  // collective/halving_doubling.h; the ring where it does not fit
};

struct CollectiveOptions {
  // The largest message: smaller chunks pipeline more finely, larger ones cost fewer messages;
  // 512 KiB measured best for 2 ranks on loopback (bench allreduce --chunk_bytes).
  size_t max_chunk_bytes = 512 * 1024;
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::kAuto;
  // kAuto's choice: halving-doubling up to this size. Fewer steps win while a step's wake-ups
  // cost more than its bytes; beyond it, the ring pipelines its chunks better (bench allreduce
  // --ranks 4 --algorithm ring / halving_doubling).
  size_t halving_doubling_max_bytes = 4 << 20;
};

// Thread-safety: one thread at a time. Every rank must make the same calls in the same order with
// the same lengths; a rank that does not is reported (CollectiveError) rather than mixed in.
class Communicator {
 public:
  explicit Communicator(RingLinks& links, CollectiveOptions options = {});

  int rank() const { return links_.rank(); }
  int size() const { return links_.size(); }

  // See ring_allreduce.h (and halving_doubling.h, which options.algorithm may choose instead).
  // Throws CollectiveError (or TransportError) if the ring fails.
  // `bucket`: which of the caller's gradient buckets this is, for a stalled wait's report.
  void allreduce(std::span<float> data, ReduceOp op = ReduceOp::kSum, int bucket = -1);
  // A typed bucket (tensor/typed_span.h), as the exchange hands it over. The algorithms sum
  // float32: a bucket of any other type is refused (UsageError naming it) before anything is sent.
  void allreduce(TypedSpan data, ReduceOp op = ReduceOp::kSum, int bucket = -1);
  // Rank `root`'s data to every rank. Throws UsageError for a root that is not a rank, before
  // anything is sent. The ranks then exchange the root each names: where they differ, every rank
  // throws UsageError naming them all, and nothing else is sent.
  void broadcast(std::span<float> data, int root = 0);
  // Rank `root`'s bytes to every rank, bit for bit: integers (a global step) that no float holds,
  // tensors of any type. Moved where they lie when they are float-aligned whole floats, else
  // through a packed copy.
  void broadcast_bytes(std::span<std::byte> data, int root = 0);
  // Every rank's `mine` into every rank's `all`, rank r's at [r * mine.size(), ...): see
  // ring_allgather.h. Throws UsageError unless all.size() == size() * mine.size().
  void allgather(std::span<const float> mine, std::span<float> all);
  // allgather of bytes, bit for bit; as broadcast_bytes, packed only where they must be.
  void allgather_bytes(std::span<const std::byte> mine, std::span<std::byte> all);
  // Returns once every rank has entered it: an all-reduce of nothing, whose every step still
  // exchanges a message.
  void barrier();

 private:
  size_t max_chunk_floats() const;
  void check_root(int root) const;
  void agree_on_root(int root);
  bool use_halving_doubling(size_t bytes) const;

  RingLinks& links_;
  const CollectiveOptions options_;
  uint64_t next_op_ = 0;
  std::vector<float> scratch_;  // grows to the largest chunk received
};

}  // namespace dtrain
