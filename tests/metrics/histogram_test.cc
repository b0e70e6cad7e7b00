// TensorFlow's default histogram layout, checked against its definition: limits growing by 10%
// from 1e-12 to 1e20 on both sides of 0, a value in the bucket std::upper_bound finds, and runs
// of empty buckets folded into their last one.
#include "metrics/histogram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <random>
#include <vector>

namespace dtrain {
namespace {

TEST(Histogram, DefaultLimitsAreTensorFlowsExponentialLayout) {
  const auto limits = default_bucket_limits();
  std::vector<double> positive;
  for (double v = 1e-12; v < 1e20; v *= 1.1) positive.push_back(v);
  positive.push_back(DBL_MAX);
  ASSERT_EQ(limits.size(), 2 * positive.size() + 1);
  const size_t zero = positive.size();
  EXPECT_EQ(limits[zero], 0.0);
  for (size_t i = 0; i < positive.size(); ++i) {
    EXPECT_EQ(limits[zero + 1 + i], positive[i]);
    EXPECT_EQ(limits[zero - 1 - i], -positive[i]);
  }
  EXPECT_TRUE(std::is_sorted(limits.begin(), limits.end()));
}

// The counts a plain std::upper_bound over the limits gives, folded as TensorFlow folds them.
Histogram reference(const std::vector<float>& values) {
  const auto limits = default_bucket_limits();
  std::vector<double> counts(limits.size());
  for (float v : values) {
    const size_t b = std::upper_bound(limits.begin(), limits.end(), double(v)) - limits.begin();
    counts[b] += 1;
  }
  Histogram h;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] == 0 && i + 1 < counts.size() && counts[i + 1] == 0) continue;
    h.bucket_limit.push_back(limits[i]);
    h.bucket.push_back(counts[i]);
  }
  return h;
}

TEST(Histogram, EveryValueLandsInTheBucketUpperBoundFinds) {
  std::mt19937 random(7);
  std::vector<float> values;
  std::normal_distribution<float> normal(0.0f, 0.05f);
  for (int i = 0; i < 20000; ++i) values.push_back(normal(random));
  // Values on and around limits, where a guess from a logarithm is most likely to be off by one.
  for (double limit : default_bucket_limits()) {
    if (std::fabs(limit) > 1e30) continue;
    values.push_back(static_cast<float>(limit));
    values.push_back(std::nextafter(static_cast<float>(limit), 1.0f));
    values.push_back(std::nextafter(static_cast<float>(limit), -1.0f));
  }
  values.push_back(0.0f);
  values.push_back(-0.0f);
  values.push_back(FLT_MAX);
  values.push_back(-FLT_MAX);
  values.push_back(1e-30f);

  const Histogram h = make_histogram(values);
  const Histogram expected = reference(values);
  EXPECT_EQ(h.bucket_limit, expected.bucket_limit);
  EXPECT_EQ(h.bucket, expected.bucket);
  EXPECT_EQ(h.num, static_cast<double>(values.size()));
  EXPECT_EQ(h.min, -FLT_MAX);
  EXPECT_EQ(h.max, FLT_MAX);
}

TEST(Histogram, SumsAndExtremesAreOfTheFiniteValues) {
  const std::vector<float> values = {1.5f, -2.0f, 0.25f, NAN, INFINITY};
  const Histogram h = make_histogram(values);
  EXPECT_EQ(h.num, 3);
  EXPECT_DOUBLE_EQ(h.sum, -0.25);
  EXPECT_DOUBLE_EQ(h.sum_squares, 2.25 + 4.0 + 0.0625);
  EXPECT_EQ(h.min, -2.0);
  EXPECT_EQ(h.max, 1.5);
  double counted = 0;
  for (double c : h.bucket) counted += c;
  EXPECT_EQ(counted, 3);
  // Three values, so three non-empty buckets, each after a folded run of empty ones, and the
  // folded run up to DBL_MAX at the end.
  EXPECT_EQ(h.bucket.size(), 7u);
  EXPECT_EQ(h.bucket_limit.back(), DBL_MAX);
}

TEST(Histogram, NoValuesIsOneEmptyBucket) {
  const Histogram h = make_histogram({});
  EXPECT_EQ(h.num, 0);
  ASSERT_EQ(h.bucket.size(), 1u);
  EXPECT_EQ(h.bucket[0], 0);
  EXPECT_EQ(h.bucket_limit[0], DBL_MAX);
}

}  // namespace
}  // namespace dtrain
