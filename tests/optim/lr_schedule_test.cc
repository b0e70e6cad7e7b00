// The learning-rate schedules against values worked out by hand from tf.keras's formulas
// (optim/lr_schedule.h), the defaults a run gives them, and the refusals of bad values.
#include "optim/lr_schedule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "plan/recipes.h"
#include "plan/run_plan.h"
#include "train/train_config.h"

namespace dtrain {
namespace {

using ::testing::HasSubstr;

TEST(LrScheduleTest, CosineFallsFromBaseToAlphaAndStaysThere) {
  const LrSchedule s{.base = 0.1f, .decay_steps = 100, .decay = LrDecay::kCosine, .alpha = 0.1f};
  EXPECT_FLOAT_EQ(s.at(0), 0.1f);
  // 0.1 · (0.9 · ½(1 + cos(π/4)) + 0.1) = 0.1 · (0.9 · 0.853553 + 0.1)
  EXPECT_NEAR(s.at(25), 0.0868198, 1e-6);
  EXPECT_NEAR(s.at(50), 0.055, 1e-7);  // half way: 0.1 · (0.9 · ½ + 0.1)
  EXPECT_NEAR(s.at(100), 0.01, 1e-7);
  EXPECT_NEAR(s.at(1000), 0.01, 1e-7) << "Keras clamps the step at decay_steps";
}

TEST(LrScheduleTest, PiecewiseTakesTheValueOfTheFirstBoundaryAtOrAboveTheStep) {
  const LrSchedule s{
      .decay = LrDecay::kPiecewise, .boundaries = {1000, 2000}, .values = {0.1f, 0.01f, 0.001f}};
  EXPECT_FLOAT_EQ(s.at(0), 0.1f);
  EXPECT_FLOAT_EQ(s.at(1000), 0.1f) << "Keras: step <= boundary";
  EXPECT_FLOAT_EQ(s.at(1001), 0.01f);
  EXPECT_FLOAT_EQ(s.at(2000), 0.01f);
  EXPECT_FLOAT_EQ(s.at(2001), 0.001f);
  EXPECT_FLOAT_EQ(s.at(1'000'000), 0.001f);
}

TEST(LrScheduleTest, WarmupRisesLinearlyFromZeroAndComposesWithAnySchedule) {
  const LrSchedule piecewise{.decay = LrDecay::kPiecewise,
                             .boundaries = {20},
                             .values = {0.2f, 0.02f},
                             .warmup_steps = 10};
  EXPECT_FLOAT_EQ(piecewise.at(0), 0.0f);
  EXPECT_FLOAT_EQ(piecewise.at(5), 0.1f);
  EXPECT_FLOAT_EQ(piecewise.at(10), 0.2f);
  EXPECT_FLOAT_EQ(piecewise.at(21), 0.02f) << "boundaries count global steps, warmup or not";

  const LrSchedule cosine{
      .base = 1.0f, .decay_steps = 100, .decay = LrDecay::kCosine, .warmup_steps = 10};
  // ½ · ½(1 + cos(π · 5/100))
  EXPECT_NEAR(cosine.at(5), 0.5 * 0.5 * (1 + std::cos(M_PI * 0.05)), 1e-6);
  EXPECT_NEAR(cosine.at(50), 0.5, 1e-6);

  const LrSchedule exponential{
      .base = 0.8f, .decay_rate = 0.5f, .decay_steps = 4, .warmup_steps = 4};
  EXPECT_FLOAT_EQ(exponential.at(2), 0.4f);
  EXPECT_FLOAT_EQ(exponential.at(4), 0.4f);  // one period of decay, warmup over
}

TEST(LrScheduleTest, DescribeNamesTheScheduleAndItsSettings) {
  EXPECT_EQ((LrSchedule{.base = 0.5f, .decay_rate = 0.99f, .decay_steps = 550}.describe()),
            "0.5 exponential decay 0.99 per 550 steps (staircase)");
  EXPECT_EQ((LrSchedule{.base = 0.1f,
                        .decay_steps = 5500,
                        .decay = LrDecay::kCosine,
                        .alpha = 0.5f,
                        .warmup_steps = 100}
                 .describe()),
            "0.1 cosine decay to 0.05 over 5500 steps, linear warmup over 100 steps");
  EXPECT_EQ(
      (LrSchedule{
          .decay = LrDecay::kPiecewise, .boundaries = {1000, 2000}, .values = {0.1f, 0.01f, 0.001f}}
           .describe()),
      "piecewise 0.1 to step 1000, 0.01 to step 2000, then 0.001");
}

TEST(LrScheduleTest, ARunsCosineDecaysOverTheWholeRunAndExponentialPerEpoch) {
  TrainConfig c = recipe_for("softmax");
  c.lr_schedule = LrDecay::kCosine;
  EXPECT_EQ(lr_schedule_of(c, 550, 3000).decay_steps, 3000);
  c.lr_schedule = LrDecay::kExponential;
  EXPECT_EQ(lr_schedule_of(c, 550, 3000).decay_steps, 550);
  c.lr_decay_steps = 7;
  EXPECT_EQ(lr_schedule_of(c, 550, 3000).decay_steps, 7);
}

TEST(LrScheduleTest, BadSchedulesAreRefusedNamingTheFlag) {
  const auto refusal = [](auto change) {
    TrainConfig c = recipe_for("softmax");
    change(c);
    try {
      validate_train_config(c);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_THAT(refusal([](TrainConfig& c) {
                c.lr_schedule = LrDecay::kPiecewise;
                c.lr_boundaries = {10, 20};
                c.lr_values = {0.1f, 0.01f};
              }),
              HasSubstr("--lr_values 0.1,0.01: needs 3 rates"));
  EXPECT_THAT(refusal([](TrainConfig& c) {
                c.lr_schedule = LrDecay::kPiecewise;
                c.lr_boundaries = {20, 10};
                c.lr_values = {0.1f, 0.01f, 0.001f};
              }),
              HasSubstr("--lr_boundaries 20,10: steps must be positive and strictly increasing"));
  EXPECT_THAT(refusal([](TrainConfig& c) { c.lr_schedule = LrDecay::kPiecewise; }),
              HasSubstr("--lr_values"));
  EXPECT_THAT(refusal([](TrainConfig& c) { c.lr_alpha = 0.1f; }),
              HasSubstr("--lr_alpha 0.1: only --lr_schedule cosine"));
  EXPECT_THAT(refusal([](TrainConfig& c) { c.lr_values = {0.1f}; }),
              HasSubstr("--lr_values: only --lr_schedule piecewise"));
  EXPECT_THAT(refusal([](TrainConfig& c) { c.lr_warmup_steps = -1; }),
              HasSubstr("--lr_warmup_steps -1"));
}

}  // namespace
}  // namespace dtrain
