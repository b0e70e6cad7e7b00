// How `dtrain bench gemm` times a piece of work: runs of it over a window of seconds, rounds
// interleaved by the caller, the median round kept.
#pragma once

#include <functional>
#include <vector>

namespace dtrain::bench {

// Seconds per run of `work`, over at least `window` seconds, after one untimed run (which
// JIT-compiles oneDNN's kernels for the shape).
double seconds_per_run(const std::function<void()>& work, double window);

// The median of `values` (the upper one of an even count); values must not be empty.
double median(std::vector<double> values);

}  // namespace dtrain::bench
