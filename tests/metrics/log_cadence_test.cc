// The step-line cadence: every N steps or every S seconds, whichever first, on a clock the test
// moves by hand.
#include "metrics/log_cadence.h"

#include <gtest/gtest.h>

#include <vector>

namespace dtrain {
namespace {

using namespace std::chrono_literals;
using Clock = LogCadence::Clock;

TEST(LogCadence, ALineEveryNStepsWhileTheyComeQuickly) {
  const Clock::time_point t0{};
  LogCadence cadence(/*every_steps=*/3, /*every_seconds=*/10, t0);
  std::vector<int64_t> lines;
  for (int64_t step = 1; step <= 10; ++step)
    if (cadence.due(step, t0 + step * 1ms)) lines.push_back(step);
  EXPECT_EQ(lines, (std::vector<int64_t>{3, 6, 9}));
}

TEST(LogCadence, ALineAfterTheIntervalWhenStepsAreSlowAndTheIntervalRestartsAtEachLine) {
  const Clock::time_point t0{};
  LogCadence cadence(100, 10, t0);
  EXPECT_FALSE(cadence.due(1, t0 + 9s));
  EXPECT_TRUE(cadence.due(2, t0 + 10s));
  EXPECT_FALSE(cadence.due(3, t0 + 19s)) << "10 s from the last line, not from the start";
  EXPECT_TRUE(cadence.due(4, t0 + 20s));
  EXPECT_TRUE(cadence.due(100, t0 + 21s)) << "the step cadence keeps its multiples";
  EXPECT_FALSE(cadence.due(101, t0 + 30s));
  EXPECT_TRUE(cadence.due(102, t0 + 31s));
}

TEST(LogCadence, ZeroStepsMeansNoLinesAndZeroSecondsMeansStepsAlone) {
  const Clock::time_point t0{};
  LogCadence never(0, 10, t0);
  EXPECT_FALSE(never.due(1, t0 + 1h));
  LogCadence steps_only(5, 0, t0);
  EXPECT_FALSE(steps_only.due(1, t0 + 1h));
  EXPECT_TRUE(steps_only.due(5, t0 + 1h));
}

}  // namespace
}  // namespace dtrain
