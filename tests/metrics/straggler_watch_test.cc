// StragglerWatch's rule alone: more than 1.5x the workers' median for 20 steps in a row, named
// once; and the progress line's means. Real slowed workers: tests/train/stall_report_test.cc.
#include "metrics/straggler_watch.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dtrain {
namespace {

using ::testing::HasSubstr;

std::string worker_name(int rank) { return fmt::format("worker{}", rank); }

TEST(StragglerWatch, NamesAWorkerSlowerThanTheRuleForTwentyStepsInARowOnce) {
  StragglerWatch watch("its own part of a step");
  const std::vector<float> slow = {0.010f, 0.016f, 0.010f};  // worker1 at 1.6x
  for (int step = 1; step < StragglerWatch::kSteps; ++step)
    EXPECT_TRUE(watch.observe(slow, worker_name).empty()) << step;
  const std::vector<std::string> named = watch.observe(slow, worker_name);
  ASSERT_EQ(named.size(), 1u);
  EXPECT_THAT(named[0],
              HasSubstr("worker1 is a straggler: its own part of a step has taken more than 1.5x"));
  EXPECT_THAT(named[0], HasSubstr("16.0 ms against 10.0 ms, 1.6x"));
  for (int step = 0; step < 3 * StragglerWatch::kSteps; ++step)
    EXPECT_TRUE(watch.observe(slow, worker_name).empty()) << "named once a run";
}

TEST(StragglerWatch, AFastStepBreaksTheRunAndSlightlySlowerIsNotSlow) {
  StragglerWatch watch("its own part of a step");
  const std::vector<float> slow = {0.010f, 0.020f, 0.010f};
  const std::vector<float> even = {0.010f, 0.010f, 0.010f};
  const std::vector<float> under_the_rule = {0.010f, 0.0149f, 0.010f};
  for (int round = 0; round < 5; ++round) {
    for (int step = 1; step < StragglerWatch::kSteps; ++step)
      EXPECT_TRUE(watch.observe(slow, worker_name).empty());
    EXPECT_TRUE(watch.observe(even, worker_name).empty());
  }
  for (int step = 0; step < 2 * StragglerWatch::kSteps; ++step)
    EXPECT_TRUE(watch.observe(under_the_rule, worker_name).empty());
  // Sub-millisecond differences are the scheduler's, whatever their ratio.
  const std::vector<float> tiny = {0.0001f, 0.0004f, 0.0001f};
  for (int step = 0; step < 2 * StragglerWatch::kSteps; ++step)
    EXPECT_TRUE(watch.observe(tiny, worker_name).empty());
}

TEST(StragglerWatch, TheSummaryIsEachWorkersMeanSinceTheLastOne) {
  StragglerWatch watch("its own part of a step");
  EXPECT_EQ(watch.take_summary(worker_name), "");
  watch.observe(std::vector<float>{0.001f, 0.003f}, worker_name);
  watch.observe(std::vector<float>{0.003f, 0.005f}, worker_name);
  EXPECT_EQ(watch.take_summary(worker_name),
            "own step time (ms, mean of 2 steps): worker0 2.00, worker1 4.00");
  EXPECT_EQ(watch.take_summary(worker_name), "");
  // A change of the workers' number starts afresh.
  watch.observe(std::vector<float>{0.001f, 0.001f, 0.004f}, worker_name);
  EXPECT_EQ(watch.take_summary(worker_name),
            "own step time (ms, mean of 1 steps): worker0 1.00, worker1 1.00, worker2 4.00");
}

}  // namespace
}  // namespace dtrain
