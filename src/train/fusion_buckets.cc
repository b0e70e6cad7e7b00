// Greedy cut: a bucket closes before the tensor that would overflow it.
#include "train/fusion_buckets.h"

#include <algorithm>
#include <chrono>

namespace dtrain {

std::vector<ArenaSlice> fusion_buckets(const ParamSet& layout, size_t fusion_bytes) {
  const size_t arena = layout.flat().size();
  if (arena == 0) return {};
  if (fusion_bytes == 0) return {ArenaSlice{0, arena}};
  const size_t most = std::max<size_t>(1, fusion_bytes / sizeof(float));
  std::vector<ArenaSlice> buckets;
  size_t open = 0;  // where the bucket being filled starts
  for (size_t i = 0; i < layout.count(); ++i) {
    const size_t begin = layout.offset(i);
    const size_t end = i + 1 < layout.count() ? layout.offset(i + 1) : arena;
    if (end - open <= most) continue;  // tensor i fits in the open bucket
    if (begin > open) {
      buckets.push_back({open, begin - open});
      open = begin;
    }
    for (; end - open > most; open += most) buckets.push_back({open, most});
  }
  if (arena > open) buckets.push_back({open, arena - open});
  return buckets;
}

GradientBuckets::GradientBuckets(GradSet& grads, size_t fusion_bytes) {
  for (const ArenaSlice& slice : fusion_buckets(grads, fusion_bytes))
    buckets_.push_back(grads.flat().subspan(slice.begin, slice.size));
}

size_t GradientBuckets::largest_bytes() const {
  size_t largest = 0;
  for (const TypedSpan& bucket : buckets_) largest = std::max(largest, bucket.size_bytes());
  return largest;
}

void GradientBuckets::average(Communicator& communicator) {
  using Clock = std::chrono::steady_clock;
  auto began = Clock::now();
  for (size_t i = 0; i < buckets_.size(); ++i) {
    communicator.allreduce(buckets_[i], ReduceOp::kAverage, static_cast<int>(i));
    if (observer_) {
      const auto now = Clock::now();
      observer_(static_cast<int>(i), buckets_[i].size_bytes(),
                std::chrono::duration<double>(now - began).count());
      began = now;
    }
  }
}

}  // namespace dtrain
