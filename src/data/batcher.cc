// Batcher: a shuffle that depends on nothing but (seed, epoch) — our own Fisher–Yates over our own
// uniform draw, since std::uniform_int_distribution differs between standard libraries — and a
// gather of the chosen rows into buffers allocated once.
#include "data/batcher.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>
#include <stdexcept>

#include "base/error.h"
#include "data/shuffle_random.h"

namespace dtrain {
namespace {

int64_t shard_size_of(int64_t data_size, int shard_index, int shard_count) {
  return data_size > shard_index ? (data_size - shard_index + shard_count - 1) / shard_count : 0;
}

}  // namespace

Batcher::Batcher(const Dataset& data, int batch_size, uint64_t seed, int shard_index,
                 int shard_count, Sharding sharding, bool shuffle)
    : data_(&data),
      batch_size_(batch_size),
      seed_(seed),
      shard_index_(shard_index),
      shard_count_(shard_count),
      sharding_(sharding),
      shuffle_(shuffle) {
  if (shard_count < 1) {
    throw UsageError(fmt::format("shard_count {}: must be at least 1", shard_count));
  }
  if (shard_index < 0 || shard_index >= shard_count) {
    throw UsageError(fmt::format("shard_index {}: must be in 0..{} for {} shards", shard_index,
                                 shard_count - 1, shard_count));
  }
  if (batch_size < 1) {
    throw UsageError(fmt::format("--batch_size {}: must be at least 1", batch_size));
  }
  if (!data.weights.empty() && static_cast<int64_t>(data.weights.size()) != data.size) {
    throw std::logic_error(
        fmt::format("Batcher: {} example weights for {} examples", data.weights.size(), data.size));
  }
  const bool slices = sharding == Sharding::kBatchSlices;
  const int64_t shard_size =
      slices ? data.size / shard_count : shard_size_of(data.size, shard_index, shard_count);
  if (batch_size > shard_size) {
    throw UsageError(
        fmt::format("--batch_size {}: larger than this worker's shard of {} examples ({} examples "
                    "in {} shards)",
                    batch_size, shard_size, data.size, shard_count));
  }
  steps_per_epoch_ = shard_size / batch_size;
  order_.resize(slices ? data.size : shard_size);
  images_.resize(static_cast<size_t>(batch_size) * data.example_size);
  labels_.resize(batch_size);
  if (!data.weights.empty()) weights_.resize(batch_size);
  point_batch(batch_size);
}

void Batcher::point_batch(int size) {
  batch_ =
      Batch{images_.data(), labels_.data(), size, weights_.empty() ? nullptr : weights_.data()};
}

void Batcher::shuffle_for_epoch(int64_t epoch) {
  const int64_t n = static_cast<int64_t>(order_.size());
  if (sharding_ == Sharding::kBatchSlices) {
    for (int64_t k = 0; k < n; ++k) order_[k] = k;
  } else {
    for (int64_t k = 0; k < n; ++k) order_[k] = shard_index_ + k * shard_count_;
  }
  shuffled_epoch_ = epoch;
  if (!shuffle_) return;
  // Fisher–Yates (Knuth's Algorithm P), from the back: position i takes a uniform pick of 0..i.
  std::mt19937_64 rng(epoch_seed(seed_, epoch));
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(uniform_below(rng, static_cast<uint64_t>(i) + 1));
    std::swap(order_[i], order_[j]);
  }
}

const Batch& Batcher::next() {
  const int64_t global_batch = position_ ? global_batch_ : int64_t{shard_count_} * batch_size_;
  if (position_) epoch_ = batch_start(*position_, global_batch, data_->size).epoch;
  if (shuffled_epoch_ != epoch_) shuffle_for_epoch(epoch_);
  const int64_t example_size = data_->example_size;
  int64_t first = sharding_ == Sharding::kBatchSlices
                      ? (index_ * shard_count_ + shard_index_) * batch_size_
                      : index_ * batch_size_;
  if (position_) {
    first = batch_start(*position_, global_batch, data_->size).taken + slice_first_;
    *position_ = after_batch(*position_, global_batch, data_->size);
  }
  for (int b = 0; b < batch_.size; ++b) {
    const int64_t row = order_[first + b];
    const float* source = data_->rows().data() + row * example_size;
    std::copy(source, source + example_size, images_.data() + b * example_size);
    labels_[b] = data_->labels[row];
    if (!weights_.empty()) weights_[b] = data_->weights[row];
  }
  if (position_) return batch_;
  if (++index_ == steps_per_epoch_) {
    ++epoch_;
    index_ = 0;
  }
  return batch_;
}

void Batcher::reslice(int index, int count, DataPosition at, int64_t global_batch) {
  if (sharding_ != Sharding::kBatchSlices) {
    throw std::logic_error("Batcher::reslice: only a Batcher of batch slices follows a membership");
  }
  if (count < 1 || index < 0 || index >= count) {
    throw UsageError(fmt::format("slice {} of {}: no such slice", index, count));
  }
  if (global_batch > data_->size) {
    throw UsageError(
        fmt::format("a global batch of {} examples ({} workers): more than the {} examples",
                    global_batch, count, data_->size));
  }
  if (global_batch < count) {
    throw UsageError(fmt::format("a global batch of {} examples leaves some of {} workers none",
                                 global_batch, count));
  }
  const int64_t base = global_batch / count;
  const int64_t extra = global_batch % count;
  const auto size = static_cast<int>(base + (index < extra ? 1 : 0));
  if (size > static_cast<int>(labels_.size())) {
    images_.resize(static_cast<size_t>(size) * data_->example_size);
    labels_.resize(static_cast<size_t>(size));
    if (!weights_.empty()) weights_.resize(static_cast<size_t>(size));
  }
  point_batch(size);
  shard_index_ = index;
  shard_count_ = count;
  global_batch_ = global_batch;
  slice_first_ = index * base + std::min<int64_t>(index, extra);
  steps_per_epoch_ = data_->size / global_batch;
  position_ = at;
  epoch_ = batch_start(at, global_batch, data_->size).epoch;
}

void Batcher::seek(int64_t step) {
  if (step < 0) throw UsageError(fmt::format("seek to step {}: must be at least 0", step));
  position_.reset();
  batch_.size = batch_size_;
  epoch_ = step / steps_per_epoch_;
  index_ = step % steps_per_epoch_;
}

}  // namespace dtrain
