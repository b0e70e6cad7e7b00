// Initialisers.
#include "nn/init.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>

namespace dtrain {
namespace {

// Uniform in (0, 1) from 53 random bits: spelled out rather than std::uniform_real_distribution so
// that a seed gives the same parameters with any standard library.
double uniform_open(std::mt19937_64& rng) { return ((rng() >> 11) + 0.5) * 0x1.0p-53; }

// Box–Muller, one draw per call (the second value is discarded for simplicity).
double standard_normal(std::mt19937_64& rng) {
  const double u1 = uniform_open(rng), u2 = uniform_open(rng);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

uint64_t mix(uint64_t seed, uint64_t index) {
  // splitmix64 finaliser: decorrelates streams of neighbouring seeds.
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

void fill_truncated_normal(std::span<float> values, float stddev, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (float& v : values) {
    double x;
    do {
      x = standard_normal(rng);
    } while (std::abs(x) > 2.0);
    v = static_cast<float>(x * stddev);
  }
}

void initialize_params(ParamSet& params, uint64_t seed) {
  for (size_t i = 0; i < params.count(); ++i) {
    const ParamSpec& spec = params.spec(i);
    std::span<float> values = params.values(i);
    switch (spec.init) {
      case InitKind::kZeros:
        std::fill(values.begin(), values.end(), 0.0f);
        break;
      case InitKind::kConstant:
        std::fill(values.begin(), values.end(), spec.init_value);
        break;
      case InitKind::kTruncatedNormal:
        fill_truncated_normal(values, spec.init_value, mix(seed, i));
        break;
    }
  }
}

}  // namespace dtrain
