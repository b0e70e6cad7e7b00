// TensorFlow's histogram of a tensor's values (core/lib/histogram/histogram.cc), which TensorBoard
// shows from a HistogramProto: fixed bucket limits growing by 10% from ±1e-12 to ±1e20 around a
// bucket at 0, so histograms of one tag line up across steps without knowing the range first.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace dtrain {

struct Histogram {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  // bucket[i] counts the values v with bucket_limit[i-1] <= v < bucket_limit[i]. Runs of empty
  // buckets are folded into their last one, as TensorFlow writes them; at least one bucket.
  std::vector<double> bucket_limit;
  std::vector<double> bucket;
};

// The default limits: -DBL_MAX, ..., -1e-12, 0, 1e-12, ..., DBL_MAX (1,549 of them).
std::span<const double> default_bucket_limits();

// Non-finite values are left out: a NaN has no bucket (the run stops on a non-finite loss anyway).
Histogram make_histogram(std::span<const float> values);

}  // namespace dtrain
