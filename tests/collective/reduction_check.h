// Inputs for collective tests and the reference they are checked against: rank-dependent values in
// [-1, 1] and their sum over the ranks in double precision.
#pragma once

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

namespace dtrain::testing {

inline std::vector<float> rank_values(int rank, size_t length) {
  std::mt19937 generator(static_cast<unsigned>(rank * 7919 + length));
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> values(length);
  for (float& v : values) v = value(generator);
  return values;
}

inline std::vector<double> exact_sum(int ranks, size_t length) {
  std::vector<double> sum(length, 0.0);
  for (int r = 0; r < ranks; ++r) {
    const std::vector<float> values = rank_values(r, length);
    for (size_t i = 0; i < length; ++i) sum[i] += values[i];
  }
  return sum;
}

// Every element within float rounding of exact * scale: n additions of values in [-1, 1] lose at
// most about n * n * FLT_EPSILON, and a scale adds one rounding.
inline void expect_matches_sum(const std::vector<float>& got, const std::vector<double>& exact,
                               int ranks, double scale, const char* where) {
  ASSERT_EQ(got.size(), exact.size()) << where;
  const double tolerance = 2.0 * ranks * ranks * FLT_EPSILON * scale + 1e-30;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::abs(got[i] - exact[i] * scale) <= tolerance) && bad++ < 3) {
      ADD_FAILURE() << where << ": element " << i << " is " << got[i] << ", expected "
                    << exact[i] * scale;
    }
  }
  EXPECT_EQ(bad, 0u) << where;
}

}  // namespace dtrain::testing
