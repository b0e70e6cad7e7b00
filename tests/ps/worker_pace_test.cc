// WorkerPace (ps/worker_pace.h): the times it counts as a worker's own, and the progress line's
// means between two readings, which are never negative.
#include "ps/worker_pace.h"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

namespace dtrain::testing {
namespace {

using Totals = WorkerPace::Totals;
using std::chrono::milliseconds;

TEST(WorkerPace, MeansAreOfTheStepsSinceTheLastReading) {
  const std::vector<Totals> before = {{.seconds = 1.0, .steps = 10}, {.seconds = 2.0, .steps = 10}};
  const std::vector<Totals> now = {{.seconds = 2.0, .steps = 20}, {.seconds = 2.0, .steps = 10}};
  // worker1 took no step since: left out.
  EXPECT_EQ(mean_step_times_ms(now, before), " worker0 100.00");
  EXPECT_EQ(mean_step_times_ms(before, before), "");
}

TEST(WorkerPace, TotalsThatWentBackCountFromZero) {
  // ps0 restarted: its counts began again, below the last reading's.
  const std::vector<Totals> before = {{.seconds = 5.0, .steps = 50}};
  const std::vector<Totals> now = {{.seconds = 0.2, .steps = 2}};
  EXPECT_EQ(mean_step_times_ms(now, before), " worker0 100.00");
  // A worker the last reading did not know yet.
  const std::vector<Totals> more = {{.seconds = 0.2, .steps = 2}, {.seconds = 0.3, .steps = 1}};
  EXPECT_EQ(mean_step_times_ms(more, now), " worker1 300.00");
}

TEST(WorkerPace, AMeanIsNeverNegativeZero) {
  const std::vector<Totals> before = {{.seconds = 1.0, .steps = 10}};
  const std::vector<Totals> now = {{.seconds = 1.0 - 1e-12, .steps = 11}};
  EXPECT_EQ(mean_step_times_ms(now, before), " worker0 0.00");
}

TEST(WorkerPace, AStepAppliedAfterThePushTookNoneOfTheWorkersTime) {
  WorkerPace pace(1, [](const std::string&) {});
  const WorkerPace::Clock::time_point start = WorkerPace::Clock::now();
  pace.pushed(0, start);
  // The step this push follows was applied after the push was stamped (a backup's late gradient).
  pace.pushed(0, start + milliseconds(10), start + milliseconds(30));
  const std::vector<Totals> totals = pace.totals();
  ASSERT_EQ(totals.size(), 1u);
  EXPECT_EQ(totals[0].steps, 1u);
  EXPECT_EQ(totals[0].seconds, 0.0);
}

}  // namespace
}  // namespace dtrain::testing
