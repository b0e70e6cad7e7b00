// ps0's view of each worker's pace (issue 36): from the end of a worker's last step to its push to
// ps0's first shard is that worker's own step time as the ps sees it, whatever delays it (its
// data, its gradients, its link): async, the time between its pushes; sync, from the step's
// application (which its last reply waited for) to its next push, as a slow worker holds every
// worker's pushes to its own pace. Kept as running totals, which the chief reads with the counters
// (kCountersReply) to print every worker's mean step time since its last progress line; and, round
// by round (a round ends once every worker that has pushed has pushed again), checked for
// stragglers: a worker above 1.5x the median for 20 rounds in a row is named once
// (metrics/straggler_watch.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "metrics/straggler_watch.h"

namespace dtrain {

// Thread-safe: every worker's connection thread calls pushed().
class WorkerPace {
 public:
  using Clock = std::chrono::steady_clock;
  struct Totals {
    double seconds = 0;  // of its own steps
    uint32_t steps = 0;  // steps counted
  };

  // `report` takes the straggler lines ("worker1 is a straggler: ...").
  WorkerPace(int workers, std::function<void(const std::string&)> report);

  // Worker `worker` pushed to the watched shard at `now`; its step began at `since` (sync: when the
  // step before was applied, which its reply waited for), or, with the epoch, at its last push
  // (async: a push is answered at once). Workers outside 0..workers-1 are left out.
  void pushed(int worker, Clock::time_point now, Clock::time_point since = {});
  // Every worker's totals so far, by worker.
  std::vector<Totals> totals() const;

 private:
  void end_round();  // REQUIRES: mutex_ held

  const std::function<void(const std::string&)> report_;
  mutable std::mutex mutex_;
  std::vector<Clock::time_point> last_;  // guarded by mutex_; epoch: not yet pushed
  std::vector<Totals> totals_;           // guarded by mutex_
  std::vector<float> round_;             // guarded by mutex_; this round's time, -1: not yet
  std::vector<float> times_;             // guarded by mutex_: scratch for a round's end
  std::vector<int> workers_;             // guarded by mutex_: whose times_ they are
  StragglerWatch stragglers_{"its own part of a step, as ps0 sees it"};
};

// The progress line's part for each worker between two readings of the totals, `before` and
// `now`: " worker0 1.20, worker1 11.40", each worker's mean own step time in ms since `before`,
// never negative; a worker with no step since is left out, and one whose totals went back (ps0
// restarted and counts afresh) counts from zero. "" when no worker stepped.
std::string mean_step_times_ms(std::span<const WorkerPace::Totals> now,
                               std::span<const WorkerPace::Totals> before);

}  // namespace dtrain
