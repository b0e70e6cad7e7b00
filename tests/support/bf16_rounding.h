// bfloat16's value of a float, rounded to nearest with ties to even, written out here so that the
// bf16 tests check oneDNN's conversions against arithmetic dtrain did not take from it.
#pragma once

#include <bit>
#include <cstdint>

namespace dtrain::testing {

inline float bf16_rounded(float x) {
  uint32_t bits = std::bit_cast<uint32_t>(x);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return std::bit_cast<float>(bits & 0xffff0000u);
}

}  // namespace dtrain::testing
