// The bucket of a value is found from its logarithm and then checked against the limits, which
// are the products TensorFlow computes (1e-12·1.1·1.1·...), not exact powers: a binary search over
// 1,549 limits per value would cost the writer thread several times as much on a large model.
#include "metrics/histogram.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

namespace dtrain {
namespace {

constexpr double kSmallest = 1.0e-12;
constexpr double kLargest = 1.0e20;
constexpr double kGrowth = 1.1;

std::vector<double> make_default_limits() {
  std::vector<double> positive;
  for (double v = kSmallest; v < kLargest; v *= kGrowth) positive.push_back(v);
  positive.push_back(DBL_MAX);
  std::vector<double> limits;
  limits.reserve(2 * positive.size() + 1);
  for (auto it = positive.rbegin(); it != positive.rend(); ++it) limits.push_back(-*it);
  limits.push_back(0.0);
  limits.insert(limits.end(), positive.begin(), positive.end());
  return limits;
}

// The index of the first limit above v (std::upper_bound), starting from a guess a step or two
// away.
size_t bucket_of(std::span<const double> limits, double v) {
  const size_t zero = limits.size() / 2;  // limits[zero] == 0
  size_t guess = zero;
  const double magnitude = std::fabs(v);
  if (magnitude >= kSmallest) {
    const double k = std::floor(std::log(magnitude / kSmallest) / std::log(kGrowth));
    const size_t offset = static_cast<size_t>(std::clamp(k, 0.0, double(zero - 1)));
    guess = v > 0 ? zero + 1 + offset : zero - 1 - offset;
  }
  size_t b = std::min(guess, limits.size() - 1);
  while (b > 0 && limits[b - 1] > v) --b;
  while (b < limits.size() && limits[b] <= v) ++b;
  return std::min(b, limits.size() - 1);
}

}  // namespace

std::span<const double> default_bucket_limits() {
  static const std::vector<double> limits = make_default_limits();
  return limits;
}

Histogram make_histogram(std::span<const float> values) {
  const std::span<const double> limits = default_bucket_limits();
  std::vector<double> counts(limits.size(), 0.0);
  Histogram h;
  h.min = DBL_MAX;
  h.max = -DBL_MAX;
  for (const float value : values) {
    if (!std::isfinite(value)) continue;
    const double v = value;
    counts[bucket_of(limits, v)] += 1;
    h.min = std::min(h.min, v);
    h.max = std::max(h.max, v);
    h.num += 1;
    h.sum += v;
    h.sum_squares += v * v;
  }
  // TensorFlow's EncodeToProto without preserve_zero_buckets.
  for (size_t i = 0; i < counts.size();) {
    double limit = limits[i];
    double count = counts[i];
    ++i;
    if (count <= 0.0) {
      while (i < counts.size() && counts[i] <= 0.0) {
        limit = limits[i];
        count = counts[i];
        ++i;
      }
    }
    h.bucket_limit.push_back(limit);
    h.bucket.push_back(count);
  }
  return h;
}

}  // namespace dtrain
