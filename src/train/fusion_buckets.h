// How the allreduce strategy cuts the gradient arena into the buffers it all-reduces one after
// another (--fusion_bytes), as a pure function of the layout, so every worker cuts alike.
#pragma once

#include <cstddef>
#include <vector>

#include "nn/param_set.h"

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

}  // namespace dtrain
