// How the allreduce strategy cuts the gradient arena into the buffers it all-reduces one after
// another (--fusion_bytes), as a pure function of the layout, so every worker cuts alike.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <vector>

#include "collective/communicator.h"
#include "nn/param_set.h"
#include "tensor/typed_span.h"

namespace dtrain {

// A contiguous slice [begin, begin + size) of a ParamSet's flat() arena.
struct ArenaSlice {
  size_t begin = 0;
  size_t size = 0;
  bool operator==(const ArenaSlice&) const = default;
};

// The fusion buckets of an arena with this layout: slices that cover flat() exactly, in order,
// each at most fusion_bytes long (in whole floats, at least one). Consecutive tensors share a
// bucket while they fit; a tensor longer than a bucket is cut into bucket-sized pieces, its last
// piece then shared with what follows. The padding after a tensor goes with it. fusion_bytes 0:
// one bucket, the whole arena. A pure function of its arguments, so every worker cuts the same.
std::vector<ArenaSlice> fusion_buckets(const ParamSet& layout, size_t fusion_bytes);

// A step's gradients as the exchange sees them: the fusion buckets of the gradient arena, typed
// views of it (float32 today; tensor/typed_span.h), each averaged in turn in place. The steady
// state allocates nothing.
class GradientBuckets {
 public:
  // REQUIRES: grads outlives this and keeps its arena.
  GradientBuckets(GradSet& grads, size_t fusion_bytes);

  size_t count() const { return buckets_.size(); }
  TypedSpan bucket(size_t i) const { return buckets_.at(i); }
  size_t largest_bytes() const;
  // Each bucket's average is timed and given to `observer` with its number and bytes.
  void observe(std::function<void(int bucket, size_t bytes, double seconds)> observer) {
    observer_ = std::move(observer);
  }
  // Every bucket averaged over the communicator's ranks, in order. Throws CollectiveError.
  void average(Communicator& communicator);

 private:
  std::vector<TypedSpan> buckets_;
  std::function<void(int, size_t, double)> observer_;
};

}  // namespace dtrain
