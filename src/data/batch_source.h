// The stream of training batches one worker sees, whether it comes from a dataset in memory
// (Batcher) or from files streamed through a shuffle buffer. The training loop depends on this
// alone, so a new data source is a new class in data/ and nothing else.
#pragma once

#include <cstdint>

namespace dtrain {

// A view of one batch: images is (size, example_size) row-major, labels has size entries, and
// weights, where the data weigh their examples (Keras's sample_weight), too; null weights are all
// 1. They point into the source's buffers and stay valid until its next call to next().
struct Batch {
  const float* images = nullptr;
  const int32_t* labels = nullptr;
  int size = 0;
  const float* weights = nullptr;
};

// Where a run stands in its training data when the number of workers may change between steps
// (elastic membership): the epoch, and how many examples of that epoch's order the steps so far
// have taken. Every worker of a step takes its slice of the same global batch, which starts here.
struct DataPosition {
  int64_t epoch = 0;
  int64_t taken = 0;
  bool operator==(const DataPosition&) const = default;
};

// Where a global batch of `global_batch` examples starts from `at`, in an epoch of `examples`:
// at `at`, or at the start of the next epoch when fewer remain (that remainder is dropped, as
// PyTorch's DataLoader(drop_last=True) drops it). REQUIRES: 0 < global_batch <= examples.
inline DataPosition batch_start(DataPosition at, int64_t global_batch, int64_t examples) {
  if (at.taken + global_batch <= examples) return at;
  return {at.epoch + 1, 0};
}

// The position after a step whose global batch of `global_batch` examples started from `at`.
inline DataPosition after_batch(DataPosition at, int64_t global_batch, int64_t examples) {
  DataPosition start = batch_start(at, global_batch, examples);
  start.taken += global_batch;
  return start;
}

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // The next batch of this worker (across epoch boundaries without end).
  virtual const Batch& next() = 0;
  // Positions the source so that next() returns this worker's step-th batch (counting from 0) of
  // a fresh source: how a restored run continues where its checkpoint left off.
  virtual void seek(int64_t step) = 0;
  // The epoch of the batch next() returns next.
  virtual int64_t epoch() const = 0;
  // This worker's batches per epoch.
  virtual int64_t steps_per_epoch() const = 0;
  // From now on next() returns slice `index` of `count` of the global batch of `global_batch`
  // examples that starts at `at` (batch_start), then of each one after it: how an elastic worker
  // follows the membership. Slice k holds global_batch / count examples, one more for k below
  // global_batch % count, in slice order. Throws UsageError where the source cannot (streamed
  // files), for a global batch larger than the data, or for a slice left empty.
  virtual void reslice(int index, int count, DataPosition at, int64_t global_batch) = 0;
};

}  // namespace dtrain
