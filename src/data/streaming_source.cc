// StreamingSource: a reader thread (EpochStream -> shuffle buffer -> this worker's slices) and a
// queue of recycled batch buffers between it and next(), so the steady state allocates nothing.
#include "data/streaming_source.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "base/error.h"
#include "data/shuffle_random.h"

namespace dtrain {

// The examples of the files, in order, one reader open at a time.
class StreamingSource::EpochStream {
 public:
  EpochStream(const std::vector<std::filesystem::path>& files,
              const ExampleReaderFactory& open_reader, int64_t feature_count)
      : files_(files), open_reader_(open_reader), feature_count_(feature_count) {}

  // The next example into (features, label); false after the last file's last.
  bool next(std::span<float> features, int32_t& label) {
    for (;;) {
      if (!reader_) {
        if (file_ == files_.size()) return false;
        reader_ = open_reader_(files_[file_]);
        if (reader_->feature_count() != feature_count_) {
          throw DataError(fmt::format("{} has {} features per example but {} has {}",
                                      files_.front().string(), feature_count_,
                                      files_[file_].string(), reader_->feature_count()));
        }
      }
      if (reader_->next(features, label)) return true;
      reader_.reset();
      ++file_;
    }
  }

 private:
  const std::vector<std::filesystem::path>& files_;
  const ExampleReaderFactory& open_reader_;
  const int64_t feature_count_;
  size_t file_ = 0;
  std::unique_ptr<ExampleReader> reader_;
};

namespace {

void check_options(const StreamingOptions& options) {
  if (options.batch_size < 1) {
    throw UsageError(fmt::format("--batch_size {}: must be at least 1", options.batch_size));
  }
  if (options.shuffle_buffer < 1) {
    throw UsageError(
        fmt::format("--shuffle_buffer {}: must be at least 1", options.shuffle_buffer));
  }
  if (options.prefetch_batches < 1) {
    throw UsageError(
        fmt::format("prefetch_batches {}: must be at least 1", options.prefetch_batches));
  }
  if (options.worker_count < 1) {
    throw UsageError(fmt::format("worker_count {}: must be at least 1", options.worker_count));
  }
  if (options.worker_index < 0 || options.worker_index >= options.worker_count) {
    throw UsageError(fmt::format("worker_index {}: must be in 0..{} for {} workers",
                                 options.worker_index, options.worker_count - 1,
                                 options.worker_count));
  }
}

}  // namespace

StreamingSource::StreamingSource(std::vector<std::filesystem::path> files,
                                 ExampleReaderFactory open_reader, StreamingOptions options)
    : files_(std::move(files)), open_reader_(std::move(open_reader)), options_(options) {
  check_options(options_);
  if (files_.empty()) throw DataError("streaming data: no files to read");
  // The counting pass: a header's count where the format has one, else every example read once.
  std::vector<float> scratch;
  for (const std::filesystem::path& file : files_) {
    const std::unique_ptr<ExampleReader> reader = open_reader_(file);
    if (&file == &files_.front()) {
      feature_count_ = reader->feature_count();
      scratch.resize(feature_count_);
    } else if (reader->feature_count() != feature_count_) {
      throw DataError(fmt::format("{} has {} features per example but {} has {}",
                                  files_.front().string(), feature_count_, file.string(),
                                  reader->feature_count()));
    }
    if (const std::optional<int64_t> count = reader->example_count()) {
      example_count_ += *count;
      continue;
    }
    int32_t label = 0;
    while (reader->next(scratch, label)) ++example_count_;
  }
  const int64_t global_batch = int64_t{options_.batch_size} * options_.worker_count;
  steps_per_epoch_ = example_count_ / global_batch;
  if (steps_per_epoch_ == 0) {
    throw UsageError(fmt::format(
        "--batch_size {}: a global batch of {} examples ({} workers) exceeds the {} examples of "
        "{}{}",
        options_.batch_size, global_batch, options_.worker_count, example_count_,
        files_.front().string(), files_.size() > 1 ? " and the other files" : ""));
  }
  const int64_t buffer = std::min(options_.shuffle_buffer, example_count_);
  shuffle_images_.resize(static_cast<size_t>(buffer * feature_count_));
  shuffle_labels_.resize(static_cast<size_t>(buffer));
  for (int i = 0; i <= options_.prefetch_batches; ++i) {
    auto batch = std::make_unique<OwnedBatch>();
    batch->images.resize(static_cast<size_t>(options_.batch_size * feature_count_));
    batch->labels.resize(options_.batch_size);
    free_.push_back(std::move(batch));
  }
  start(0);
}

StreamingSource::~StreamingSource() { stop(); }

void StreamingSource::start(int64_t first_step) {
  next_step_ = first_step;
  reader_ = std::jthread([this, first_step](std::stop_token stop) { produce(stop, first_step); });
}

void StreamingSource::stop() {
  if (!reader_.joinable()) return;
  reader_.request_stop();  // wakes the reader from its wait on changed_ (a stop-token wait)
  reader_.join();
  // Every batch goes back to the free list; a failure of the stopped thread is forgotten.
  std::lock_guard lock(mutex_);
  while (!ready_.empty()) {
    free_.push_back(std::move(ready_.front()));
    ready_.pop_front();
  }
  error_ = nullptr;
}

const Batch& StreamingSource::next() {
  std::unique_lock lock(mutex_);
  if (current_) {
    free_.push_back(std::move(current_));
    changed_.notify_all();
  }
  changed_.wait(lock, [this] { return !ready_.empty() || error_; });
  if (ready_.empty()) std::rethrow_exception(error_);
  current_ = std::move(ready_.front());
  ready_.pop_front();
  lock.unlock();
  ++next_step_;
  batch_ = Batch{current_->images.data(), current_->labels.data(), options_.batch_size};
  return batch_;
}

void StreamingSource::seek(int64_t step) {
  if (step < 0) throw UsageError(fmt::format("seek to step {}: must be at least 0", step));
  stop();
  {
    std::lock_guard lock(mutex_);
    if (current_) free_.push_back(std::move(current_));
  }
  start(step);
}

void StreamingSource::produce(std::stop_token stop, int64_t first_step) {
  try {
    int64_t first_batch = first_step % steps_per_epoch_;
    for (int64_t epoch = first_step / steps_per_epoch_;; ++epoch, first_batch = 0) {
      if (!produce_epoch(stop, epoch, first_batch)) return;
    }
  } catch (...) {
    std::lock_guard lock(mutex_);
    error_ = std::current_exception();
    changed_.notify_all();
  }
}

std::unique_ptr<StreamingSource::OwnedBatch> StreamingSource::take_free(std::stop_token stop) {
  std::unique_lock lock(mutex_);
  if (!changed_.wait(lock, stop, [this] { return !free_.empty(); })) return nullptr;
  std::unique_ptr<OwnedBatch> batch = std::move(free_.front());
  free_.pop_front();
  return batch;
}

void StreamingSource::publish(std::unique_ptr<OwnedBatch> batch) {
  std::lock_guard lock(mutex_);
  ready_.push_back(std::move(batch));
  changed_.notify_all();
}

bool StreamingSource::produce_epoch(std::stop_token stop, int64_t epoch, int64_t first_batch) {
  const int64_t features = feature_count_;
  const int64_t batch_size = options_.batch_size;
  const int64_t global_batch = batch_size * options_.worker_count;
  const int64_t capacity = static_cast<int64_t>(shuffle_labels_.size());
  const int64_t outputs = steps_per_epoch_ * global_batch;  // the rest is dropped
  auto slot = [&](int64_t i) {
    return std::span<float>(shuffle_images_.data() + i * features, static_cast<size_t>(features));
  };

  EpochStream input(files_, open_reader_, features);
  int64_t held = 0;
  while (held < capacity && input.next(slot(held), shuffle_labels_[held])) {
    ++held;
    if (stop.stop_requested()) return false;
  }
  std::mt19937_64 rng(epoch_seed(options_.seed, epoch));
  std::unique_ptr<OwnedBatch> batch;
  for (int64_t output = 0; output < outputs; ++output) {
    if (held == 0) {
      throw DataError(fmt::format(
          "{}: the files hold fewer examples than the {} counted when the stream opened (did "
          "they change?)",
          files_.front().string(), example_count_));
    }
    // tf.data's shuffle: a uniform pick of the buffer goes out; the next input takes its place.
    const auto pick = static_cast<int64_t>(uniform_below(rng, static_cast<uint64_t>(held)));
    const int64_t within = output % global_batch;
    const bool mine =
        output / global_batch >= first_batch && within / batch_size == options_.worker_index;
    if (mine) {
      if (!batch && !(batch = take_free(stop))) return false;
      const int64_t row = within % batch_size;
      std::copy_n(shuffle_images_.data() + pick * features, features,
                  batch->images.data() + row * features);
      batch->labels[row] = shuffle_labels_[pick];
      if (row == batch_size - 1) publish(std::move(batch));
    }
    if (!input.next(slot(pick), shuffle_labels_[pick])) {
      // The input has ended: the last held example fills the gap, and the buffer shrinks.
      --held;
      std::copy_n(shuffle_images_.data() + held * features, features,
                  shuffle_images_.data() + pick * features);
      shuffle_labels_[pick] = shuffle_labels_[held];
    }
    if (stop.stop_requested()) return false;
  }
  return true;
}

void StreamingSource::reslice(int /*index*/, int /*count*/, DataPosition /*at*/,
                              int64_t /*global_batch*/) {
  throw UsageError(
      "--min_workers: an elastic job's workers follow its membership through data in memory; "
      "streamed files (--shuffle_buffer, or files larger than memory) are cut for a fixed number "
      "of workers: load them into memory, or leave --min_workers out");
}

}  // namespace dtrain
