// Products of sizes that a file states (a model's layers, a data file's header) computed without
// overflow: a product that wrapped would allocate too little, or reach a division as zero.
#pragma once

#include <cstdint>
#include <limits>

namespace dtrain {

// The value a saturated product stands at: more than any machine can hold, so a size compared
// with a memory limit is refused whether it is exact or saturated.
inline constexpr int64_t kSaturatedSize = std::numeric_limits<int64_t>::max();

// a·b, or kSaturatedSize when it does not fit int64_t. REQUIRES: a >= 0, b >= 0.
constexpr int64_t saturating_mul(int64_t a, int64_t b) {
  int64_t product = 0;
  return __builtin_mul_overflow(a, b, &product) ? kSaturatedSize : product;
}

// a + b, or kSaturatedSize when it does not fit int64_t. REQUIRES: a >= 0, b >= 0.
constexpr int64_t saturating_add(int64_t a, int64_t b) {
  int64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? kSaturatedSize : sum;
}

}  // namespace dtrain
