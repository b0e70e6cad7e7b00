// StreamingSource: the BatchSource for data files larger than memory. A reader thread streams the
// files through a shuffle buffer (tf.data's shuffle) into a short queue of batches; memory is the
// buffer plus those batches, whatever the size of the files.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <thread>
#include <vector>

#include "data/batch_source.h"
#include "data/example_reader.h"
#include "tensor/aligned.h"

namespace dtrain {

// Opens one data file as an ExampleReader; open_example_reader bound to the run's DataOptions, or
// anything else in tests.
using ExampleReaderFactory =
    std::function<std::unique_ptr<ExampleReader>(const std::filesystem::path&)>;

struct StreamingOptions {
  int batch_size = 100;  // B: this worker's examples per batch
  uint64_t seed = 0;
  int64_t shuffle_buffer = 10000;  // N: examples held for shuffling; 1 keeps the files' order
  int prefetch_batches = 4;        // batches assembled ahead of next()
  int worker_index = 0;            // k
  int worker_count = 1;            // W
};

// Semantics:
//   epoch e: the examples of files, in order, passed through a shuffle buffer of N examples
//            seeded from (seed, e): the buffer is filled with the first N inputs; then each output
//            is a uniformly random element of the buffer, whose place the next input takes; once
//            the input ends the buffer drains in random order. (tf.data's shuffle(N,
//            reshuffle_each_iteration=True).)
//   sharding: every worker streams the same files with the same seed, so all see one order;
//            worker k's s-th batch of an epoch is outputs [(s*W + k) * B, + B) of it, slice k of
//            global batch s of W*B, exactly as Batcher's Sharding::kBatchSlices. The W batches of
//            one step are what a single process with batch W*B would see.
//   steps_per_epoch: floor(examples / (W*B)); the outputs after the last whole global batch are
//            dropped, as Batcher drops them. The example count is taken once, in the
//            constructor: from each reader's example_count() when its header tells it (IDX), else
//            from a counting pass that reads the file through without keeping its examples
//            (TFRecord, CSV).
//   step s:  batch s % steps_per_epoch of epoch s / steps_per_epoch, across epochs without end.
// Memory: N examples of buffer, prefetch_batches + 1 batches of B examples, and the readers' own
// buffers; nothing grows with the files.
// Errors of the reader thread (a malformed file) are rethrown by next(), after the batches made
// before them, and by every next() after it. Thread-compatible: one thread calls next() and seek().
class StreamingSource final : public BatchSource {
 public:
  // Counts the examples (see above), then starts the reader thread at step 0. Throws UsageError
  // for options out of range or when a global batch of W*B exceeds the examples, DataError when
  // files is empty or two files differ in feature_count (naming both), and whatever open_reader
  // and the readers throw during the count.
  StreamingSource(std::vector<std::filesystem::path> files, ExampleReaderFactory open_reader,
                  StreamingOptions options);
  // Stops the reader thread and joins it, mid-epoch or not.
  ~StreamingSource() override;
  StreamingSource(const StreamingSource&) = delete;
  StreamingSource& operator=(const StreamingSource&) = delete;

  const Batch& next() override;
  // Restarts the reader thread at the step-th batch: it reads epoch step / steps_per_epoch from
  // its start and drops the batches before the step. Throws UsageError if step < 0.
  void seek(int64_t step) override;
  int64_t epoch() const override { return next_step_ / steps_per_epoch_; }
  int64_t steps_per_epoch() const override { return steps_per_epoch_; }
  // Throws UsageError: the stream's order is cut for a fixed number of workers.
  void reslice(int index, int count, DataPosition at, int64_t global_batch) override;

  int64_t feature_count() const { return feature_count_; }
  // The examples in one pass over the files.
  int64_t example_count() const { return example_count_; }

 private:
  struct OwnedBatch {
    FloatBuffer images;  // (batch_size, feature_count)
    std::vector<int32_t> labels;
  };
  class EpochStream;

  void start(int64_t first_step);
  void stop();
  // The reader thread: epochs from first_step's on, until stopped or failed.
  void produce(std::stop_token stop, int64_t first_step);
  // Streams one epoch, handing this worker's batches from global batch `first_batch` on to the
  // queue. Returns false if stopped.
  bool produce_epoch(std::stop_token stop, int64_t epoch, int64_t first_batch);
  // A free batch to fill, or null once stopped.
  std::unique_ptr<OwnedBatch> take_free(std::stop_token stop);
  void publish(std::unique_ptr<OwnedBatch> batch);

  const std::vector<std::filesystem::path> files_;
  const ExampleReaderFactory open_reader_;
  const StreamingOptions options_;
  int64_t feature_count_ = 0;
  int64_t example_count_ = 0;
  int64_t steps_per_epoch_ = 0;
  int64_t next_step_ = 0;  // the step of the batch next() returns next

  // Buffers of the reader thread only (but for their allocation in the constructor).
  FloatBuffer shuffle_images_;  // (shuffle_buffer, feature_count)
  std::vector<int32_t> shuffle_labels_;

  // The queue between the threads. Batches move free -> being filled (reader) -> ready ->
  // current (consumer, until its next next()) -> free.
  std::mutex mutex_;
  std::condition_variable_any changed_;
  std::deque<std::unique_ptr<OwnedBatch>> free_;   // guarded by mutex_
  std::deque<std::unique_ptr<OwnedBatch>> ready_;  // guarded by mutex_
  std::exception_ptr error_;                       // guarded by mutex_: the reader thread's failure
  std::unique_ptr<OwnedBatch> current_;            // the consumer's
  Batch batch_;

  std::jthread reader_;  // last: stopped and joined before the members it uses are destroyed
};

}  // namespace dtrain
