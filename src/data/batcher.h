// Batcher: the stream of training batches one worker sees — its shard of a Dataset, reshuffled
// every epoch, cut into fixed-size batches. The whole stream is a pure function of (seed, shard,
// step), so a restarted worker resumes bit for bit with seek(step) instead of saving batcher state.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "data/batch_source.h"
#include "data/dataset.h"
#include "tensor/aligned.h"

namespace dtrain {

// How the workers of a cluster divide the data.
enum class Sharding {
  // Shard k holds examples i with i % shard_count == k (sizes differ by at most one), each shard
  // shuffled on its own.
  kStrided,
  // Every worker shuffles the whole dataset the same way and takes slice k of each global batch
  // of shard_count * batch_size examples: worker k's s-th batch is rows [(s*count + k) * batch,
  // + batch) of the epoch's order. So the W batches of one step together are exactly what one
  // process with batch W*batch would see — synchronous training then equals local training.
  kBatchSlices,
};

// Semantics (kStrided; kBatchSlices as described above, with the same epoch order for all):
//   shard:   examples i of data with i % shard_count == shard_index (strided, so shard sizes differ
//            by at most one);
//   epoch e: the shard permuted by a Fisher–Yates shuffle driven by std::mt19937_64 seeded from
//            (seed, e), cut into floor(shard_size / batch_size) batches; the remainder is dropped,
//            as PyTorch's DataLoader(drop_last=True) does;
//   step s:  batch s % steps_per_epoch() of epoch s / steps_per_epoch().
// Not thread-safe. Allocates only in the constructor, and in a reslice() to a larger slice.
class Batcher final : public BatchSource {
 public:
  // REQUIRES: data outlives the Batcher.
  // Throws UsageError if batch_size < 1 or exceeds the shard, shard_count < 1, or shard_index is
  // outside 0..shard_count-1. shuffle false: every epoch takes the examples in their order (the
  // permutation above is the identity), as Keras's fit(shuffle=False) does.
  Batcher(const Dataset& data, int batch_size, uint64_t seed, int shard_index = 0,
          int shard_count = 1, Sharding sharding = Sharding::kStrided, bool shuffle = true);
  Batcher(Dataset&&, int, uint64_t, int = 0, int = 1, Sharding = {},
          bool = true) = delete;  // would dangle
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Returns the next batch (step by step, across epoch boundaries without end).
  const Batch& next() override;

  // Positions the batcher so that next() returns what the step-th call (counting from 0) to next()
  // of a fresh Batcher returns. Throws UsageError if step < 0.
  void seek(int64_t step) override;

  // The epoch of the batch next() returns next.
  int64_t epoch() const override { return epoch_; }
  int64_t steps_per_epoch() const override { return steps_per_epoch_; }
  // Sharding::kBatchSlices only (a logic error otherwise); seek() returns to counting steps. A
  // slice larger than any before grows the buffers: the one allocation outside the constructor.
  void reslice(int index, int count, DataPosition at, int64_t global_batch) override;
  int64_t shard_size() const { return static_cast<int64_t>(order_.size()); }

 private:
  void shuffle_for_epoch(int64_t epoch);
  void point_batch(int size);  // batch_ views the first `size` rows of the buffers

  const Dataset* data_;
  int batch_size_;
  uint64_t seed_;
  int shard_index_;
  int shard_count_;
  Sharding sharding_;
  bool shuffle_;
  int64_t steps_per_epoch_;

  std::vector<int64_t>
      order_;  // dataset rows of this shard (kBatchSlices: of all), in the order of shuffled_epoch_
  int64_t shuffled_epoch_ = -1;
  int64_t epoch_ = 0;  // position of the batch next() returns next
  int64_t index_ = 0;  // ... and its index within the epoch
  // After reslice(): where the next global batch starts, which replaces epoch_ and index_; the
  // global batch's size, and where this worker's slice of it starts.
  std::optional<DataPosition> position_;
  int64_t global_batch_ = 0;
  int64_t slice_first_ = 0;

  FloatBuffer images_;  // (batch_.size, example_size)
  std::vector<int32_t> labels_;
  std::vector<float> weights_;  // empty unless the data weigh their examples
  Batch batch_;
};

}  // namespace dtrain
