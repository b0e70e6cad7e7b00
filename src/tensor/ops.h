// Elementwise operations and reductions over flat float buffers, written so the compiler vectorises
// them (independent partial sums instead of one serial accumulator).
#pragma once

#include <span>

namespace dtrain {

// Σ x² in float with 16 independent partial sums.
float sum_squares(std::span<const float> x);
// y += a·x
void axpy(float a, std::span<const float> x, std::span<float> y);
// x *= a
void scale(float a, std::span<float> x);
// True when every value is finite (no NaN or Inf).
bool all_finite(std::span<const float> x);

}  // namespace dtrain
