// Stragglers (issue 36): a worker whose own part of a step — the time outside the collectives that
// every worker waits in together, so its data, its gradients and anything that delays it — is
// persistently above the others'. Each worker's own time of every step is known to the chief;
// one that takes more than kRatio × the median of all workers' for kSteps steps in a row is named,
// once a run. The chief's progress also gets each worker's mean own time since its last line.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace dtrain {

class StragglerWatch {
 public:
  static constexpr double kRatio = 1.5;
  static constexpr int kSteps = 20;
  // Below this a difference is the scheduler's noise, not a slower worker.
  static constexpr double kMinExcessSeconds = 0.0005;

  // One step's own seconds, by rank (the workers there are now; a change of their number starts
  // the watch afresh). Returns a line for each worker that has just become a straggler.
  std::vector<std::string> observe(std::span<const float> seconds,
                                   const std::function<std::string(int)>& name);
  // "own step time (ms, mean of 20 steps): worker0 1.2, worker1 11.4, worker2 1.1": each
  // worker's mean since the last call, which starts the next interval; "" if no step came.
  std::string take_summary(const std::function<std::string(int)>& name);

 private:
  void reset(size_t workers);

  std::vector<int> slow_for_;   // consecutive steps above kRatio × the median, by rank
  std::vector<bool> named_;     // named already, by rank
  std::vector<double> totals_;  // own seconds since the last summary, by rank
  int64_t steps_ = 0;           // steps since the last summary
  std::vector<float> sorted_;   // scratch for the median
};

}  // namespace dtrain
