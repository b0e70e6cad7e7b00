// Vectorisable loops for tensor/ops.h.
#include "tensor/ops.h"

#include <cmath>
#include <cstddef>

namespace dtrain {

float sum_squares(std::span<const float> x) {
  constexpr size_t kLanes = 16;
  float partial[kLanes] = {};
  const size_t n = x.size(), body = n / kLanes * kLanes;
  for (size_t i = 0; i < body; i += kLanes) {
    for (size_t l = 0; l < kLanes; ++l) partial[l] += x[i + l] * x[i + l];
  }
  float total = 0.0f;
  for (size_t i = body; i < n; ++i) total += x[i] * x[i];
  for (float p : partial) total += p;
  return total;
}

void axpy(float a, std::span<const float> x, std::span<float> y) {
  const size_t n = x.size();
  const float* __restrict xs = x.data();
  float* __restrict ys = y.data();
  for (size_t i = 0; i < n; ++i) ys[i] += a * xs[i];
}

void scale(float a, std::span<float> x) {
  for (float& v : x) v *= a;
}

bool all_finite(std::span<const float> x) {
  // x - x is 0 for finite x and NaN for NaN or ±Inf; summing keeps the loop branch-free.
  float acc = 0.0f;
  for (float v : x) acc += v - v;
  return acc == 0.0f;
}

}  // namespace dtrain
