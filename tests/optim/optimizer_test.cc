// Optimizers against TensorFlow's update rules, written out in double precision in each test.
#include "optim/optimizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "optim/lr_schedule.h"
#include "optim/moving_average.h"

namespace dtrain {
namespace {

std::vector<ParamSpec> two_tensors() {
  return {ParamSpec{.name = "w", .shape = {2, 3}, .l2 = 1.0f},
          ParamSpec{.name = "b", .shape = {3}}};
}

void fill(ParamSet& set, float start, float step) {
  float v = start;
  for (size_t i = 0; i < set.count(); ++i) {
    for (float& x : set.values(i)) {
      x = v;
      v += step;
    }
  }
}

// A statistic (ParamSpec::trainable false) between two trainable tensors is assigned its delta
// however the update is cut into chunks; the tensors around it take the optimizer's rule.
TEST(OptimizerTest, AStatisticIsAssignedItsDeltaAndItsNeighboursTakeTheRule) {
  const std::vector<ParamSpec> specs = {ParamSpec{.name = "w", .shape = {2, 3}},
                                        ParamSpec{.name = "mean", .shape = {3}, .trainable = false},
                                        ParamSpec{.name = "b", .shape = {3}}};
  for (const size_t chunk : {size_t{7}, size_t{SIZE_MAX}}) {
    ParamSet params(specs), grads(specs);
    fill(params, 1.0f, 0.5f);
    fill(grads, -0.3f, 0.1f);
    ParamSet before(specs);
    before.copy_from(params);
    auto momentum = make_optimizer({.name = "momentum", .momentum = 0.5f}, specs);
    const size_t size = params.flat().size();
    for (size_t begin = 0; begin < size; begin += std::min(chunk, size))
      momentum->apply(params, grads, 0.25f, 0, begin, begin + std::min(chunk, size - begin));
    for (size_t t = 0; t < 3; ++t) {
      const float rate = t == 1 ? 1.0f : 0.25f;  // the first momentum step is lr·g
      for (size_t j = 0; j < params.values(t).size(); ++j) {
        EXPECT_FLOAT_EQ(params.values(t)[j], before.values(t)[j] - rate * grads.values(t)[j])
            << specs[t].name << "[" << j << "], chunks of " << chunk;
      }
    }
  }
}

TEST(OptimizerTest, SgdSubtractsLearningRateTimesGradient) {
  ParamSet params(two_tensors()), grads(two_tensors());
  fill(params, 1.0f, 0.5f);
  fill(grads, -0.3f, 0.1f);
  ParamSet before(two_tensors());
  before.copy_from(params);
  auto sgd = make_optimizer({.name = "sgd"}, two_tensors());
  sgd->apply(params, grads, 0.25f, 0);
  for (size_t i = 0; i < params.count(); ++i) {
    for (size_t j = 0; j < params.values(i).size(); ++j) {
      EXPECT_FLOAT_EQ(params.values(i)[j], before.values(i)[j] - 0.25f * grads.values(i)[j]);
    }
  }
  EXPECT_TRUE(sgd->slots().empty());
}

TEST(OptimizerTest, MomentumAccumulatesAsTensorFlowApplyMomentum) {
  ParamSet params(two_tensors()), grads(two_tensors());
  fill(params, 1.0f, 0.5f);
  auto opt = make_optimizer({.name = "momentum", .momentum = 0.9f}, two_tensors());
  ASSERT_EQ(opt->slots().size(), 1u);
  EXPECT_EQ(opt->slots()[0].spec(0).name, "w/momentum");
  double value = params.values(0)[1], accum = 0;
  for (int step = 0; step < 3; ++step) {
    fill(grads, 0.1f * (step + 1), 0.05f);
    const double g = grads.values(0)[1];
    accum = 0.9 * accum + g;
    value -= 0.1 * accum;
    opt->apply(params, grads, 0.1f, step);
  }
  EXPECT_NEAR(params.values(0)[1], value, 1e-6);
}

TEST(OptimizerTest, AdamMatchesTensorFlowUpdateWithEpsilonHat) {
  ParamSet params(two_tensors()), grads(two_tensors());
  fill(params, 0.2f, -0.1f);
  OptimizerConfig config{.name = "adam", .beta1 = 0.9f, .beta2 = 0.999f, .epsilon = 1e-8f};
  auto adam = make_optimizer(config, two_tensors());
  ASSERT_EQ(adam->slots().size(), 2u);
  EXPECT_EQ(adam->slots()[0].spec(1).name, "b/adam_m");
  EXPECT_EQ(adam->slots()[1].spec(1).name, "b/adam_v");
  double value = params.values(1)[2], m = 0, v = 0;
  const double lr = 0.01;
  for (int step = 0; step < 5; ++step) {
    fill(grads, 0.3f - 0.1f * step, 0.02f);
    const double g = grads.values(1)[2];
    const double t = step + 1;
    const double lr_t = lr * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t));
    // The decay rates are float32 as in TensorFlow, so 1 - beta2 is 0.00099998713, not 0.001.
    m = 0.9 * m + double(1.0f - 0.9f) * g;
    v = 0.999 * v + double(1.0f - 0.999f) * g * g;
    value -= lr_t * m / (std::sqrt(v) + 1e-8);
    adam->apply(params, grads, static_cast<float>(lr), step);
  }
  EXPECT_NEAR(params.values(1)[2], value, 1e-6);
  EXPECT_NEAR(adam->slots()[0].values(1)[2], m, 1e-7);
  EXPECT_NEAR(adam->slots()[1].values(1)[2], v, 1e-9);
}

TEST(OptimizerTest, UnknownOptimizerIsAUsageErrorListingTheChoices) {
  try {
    make_optimizer({.name = "lion"}, two_tensors());
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("--optimizer lion"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("adam"));
  }
}

TEST(LrScheduleTest, StaircaseDecaysOncePerDecayPeriod) {
  LrSchedule s{.base = 0.8f, .decay_rate = 0.99f, .decay_steps = 550, .staircase = true};
  EXPECT_FLOAT_EQ(s.at(0), 0.8f);
  EXPECT_FLOAT_EQ(s.at(549), 0.8f);
  EXPECT_FLOAT_EQ(s.at(550), 0.8f * 0.99f);
  EXPECT_NEAR(s.at(5500), 0.8 * std::pow(0.99, 10), 1e-6);
}

TEST(LrScheduleTest, ContinuousDecayFollowsTheFractionalExponent) {
  LrSchedule s{.base = 1.0f, .decay_rate = 0.5f, .decay_steps = 100, .staircase = false};
  EXPECT_NEAR(s.at(50), std::pow(0.5, 0.5), 1e-6);
  EXPECT_NEAR(s.at(150), std::pow(0.5, 1.5), 1e-6);
}

TEST(MovingAverageTest, DecayIsCappedByTheNumUpdatesRule) {
  ParamSet params(two_tensors());
  MovingAverage ema(0.99f, params);
  EXPECT_NEAR(ema.decay_at(0), 0.1, 1e-7);  // (1+0)/(10+0)
  EXPECT_NEAR(ema.decay_at(10), 11.0 / 20.0, 1e-7);
  EXPECT_NEAR(ema.decay_at(100000), 0.99, 1e-7);  // the cap
}

TEST(MovingAverageTest, ShadowMovesTowardTheParameters) {
  ParamSet params(two_tensors());
  fill(params, 1.0f, 0.0f);
  MovingAverage ema(0.99f, params);
  EXPECT_EQ(ema.shadow().spec(0).name, "w/ExponentialMovingAverage");
  fill(params, 3.0f, 0.0f);
  ema.update(params, 10);  // decay 0.55: 1 - 0.45·(1 - 3) = 1.9
  EXPECT_NEAR(ema.shadow().values(0)[0], 1.9, 1e-6);
  EXPECT_NEAR(ema.shadow().values(1)[2], 1.9, 1e-6);
}

// TensorFlow averages the trainable variables; a statistic (BatchNormalization's moving mean) is
// evaluated as training keeps it.
TEST(MovingAverageTest, AStatisticsShadowIsItsValue) {
  std::vector<ParamSpec> specs = two_tensors();
  specs[1].trainable = false;
  ParamSet params(specs);
  fill(params, 1.0f, 0.0f);
  MovingAverage ema(0.99f, params);
  fill(params, 3.0f, 0.0f);
  ema.update(params, 10, 0, 7);  // in two pieces, the first ending inside w
  ema.update(params, 10, 7);
  EXPECT_NEAR(ema.shadow().values(0)[5], 1.9, 1e-6);
  EXPECT_EQ(ema.shadow().values(1)[2], 3.0f);
}

}  // namespace
}  // namespace dtrain
