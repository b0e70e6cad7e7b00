// Stragglers (issue 36): a worker whose time for a step is persistently above the others'. Under
// all-reduce that is its own part of a step, the time outside the collectives that every worker
// waits in together (its data, its gradients, anything that delays it), which the chief learns for
// every step; under a ps, the time between its pushes as ps0 sees them. One that takes more than
// kRatio × the median of all workers' for kSteps steps in a row is named, once a run. The
// summary is each worker's mean since the last one, for the chief's progress line.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "metrics/run_board.h"

namespace dtrain {

class StragglerWatch {
 public:
  // `measure` says what the times are, in the lines: "its own part of a step (outside the
  // collectives)".
  explicit StragglerWatch(std::string measure) : measure_(std::move(measure)) {}

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
  // The step last observed, for the live page (metrics/run_board.h): each worker's own seconds
  // (`seconds`, as given to observe), and the stragglers named then with their lines.
  WorkerTimes times(std::span<const float> seconds,
                    const std::function<std::string(int)>& name) const;

 private:
  void reset(size_t workers);

  std::vector<int> slow_for_;   // consecutive steps above kRatio × the median, by rank
  std::vector<bool> named_;     // named already, by rank
  std::vector<double> totals_;  // own seconds since the last summary, by rank
  int64_t steps_ = 0;           // steps since the last summary
  std::string measure_;
  std::vector<float> sorted_;                            // scratch for the median
  std::vector<std::pair<int, std::string>> just_named_;  // rank, line: by the last observe()
};

}  // namespace dtrain
