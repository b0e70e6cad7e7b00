#include "bench/window_timing.h"

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace dtrain::bench {

double seconds_per_run(const std::function<void()>& work, double window) {
  using Clock = std::chrono::steady_clock;
  work();
  int64_t runs = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  do {
    work();
    ++runs;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < window);
  return elapsed / static_cast<double>(runs);
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace dtrain::bench
