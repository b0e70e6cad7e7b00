// Greedy cut: a bucket closes before the tensor that would overflow it.
#include "train/fusion_buckets.h"

#include <algorithm>

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

}  // namespace dtrain
