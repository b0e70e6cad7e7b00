// The Keras 3 optimizers (sgd with momentum, rmsprop, adamw, adagrad, nadam) against their rules as
// keras/src/optimizers/*.py write them, re-implemented here in double precision from Keras'
// source (not from dtrain's), over several steps at a changing learning rate. Tolerance: 1e-6 on
// values of order 1, the float32 rounding of a few steps.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "base/error.h"
#include "optim/optimizer.h"

namespace dtrain {
namespace {

constexpr int kSteps = 6;
constexpr double kTolerance = 1e-6;

std::vector<ParamSpec> keras_layout() {
  return {ParamSpec{.name = "kernel", .shape = {3, 5}}, ParamSpec{.name = "bias", .shape = {5}}};
}

// The learning rate and gradient of value j at step t: varied, both signs, not all small.
double rate_at(int t) { return 0.05 * (1.0 + 0.5 * t); }
double gradient_at(int t, size_t j) {
  return std::sin(0.7 * static_cast<double>(j) + 1.3 * t) * (1.0 + 0.2 * static_cast<double>(j));
}
double initial_value(size_t j) { return 0.5 - 0.1 * static_cast<double>(j); }

// One value's reference: its value after each step given its state, the step's gradient and rate.
struct Reference {
  double value;
  std::vector<double> slots;
};
using ReferenceStep = std::function<void(Reference&, double g, double lr, int t)>;

// Runs `config` and the reference side by side for kSteps, comparing every value of the kernel.
void expect_matches(const OptimizerConfig& config, size_t reference_slots,
                    const ReferenceStep& step, double initial_slot = 0.0) {
  ParamSet params(keras_layout()), grads(keras_layout());
  const size_t n = params.values(0).size();
  std::vector<Reference> refs;
  for (size_t j = 0; j < n; ++j) {
    params.values(0)[j] = static_cast<float>(initial_value(j));
    refs.push_back(
        {static_cast<float>(initial_value(j)), std::vector<double>(reference_slots, initial_slot)});
  }
  auto optimizer = make_optimizer(config, keras_layout());
  for (int t = 0; t < kSteps; ++t) {
    for (size_t j = 0; j < n; ++j) grads.values(0)[j] = static_cast<float>(gradient_at(t, j));
    optimizer->apply(params, grads, static_cast<float>(rate_at(t)), t);
    for (size_t j = 0; j < n; ++j) {
      step(refs[j], static_cast<float>(gradient_at(t, j)), static_cast<float>(rate_at(t)), t);
      EXPECT_NEAR(params.values(0)[j], refs[j].value, kTolerance)
          << config.name << " value " << j << " after step " << t;
    }
  }
}

// sgd.py: m = momentum·m - lr·g; w += m (nesterov: w += momentum·m - lr·g).
TEST(KerasOptimizersTest, SgdWithMomentumFollowsKerasVelocity) {
  for (const bool nesterov : {false, true}) {
    expect_matches({.name = "sgd", .momentum = 0.8f, .use_nesterov = nesterov}, 1,
                   [&](Reference& r, double g, double lr, int) {
                     double& m = r.slots[0];
                     m = 0.8 * m - lr * g;
                     r.value += nesterov ? 0.8 * m - lr * g : m;
                   });
  }
}

TEST(KerasOptimizersTest, SgdWithoutMomentumStaysPlainAndKeepsNoSlot) {
  auto sgd = make_optimizer({.name = "sgd"}, keras_layout());
  EXPECT_TRUE(sgd->plain_sgd());
  EXPECT_TRUE(sgd->slots().empty());
  auto with_momentum = make_optimizer({.name = "sgd", .momentum = 0.9f}, keras_layout());
  EXPECT_FALSE(with_momentum->plain_sgd());
  EXPECT_EQ(with_momentum->slots().at(0).spec(1).name, "bias/momentum");
}

// rmsprop.py: vel = ρ·vel + (1-ρ)·g²; centered: avg = ρ·avg + (1-ρ)·g, d = vel - avg² + ε,
// else d = vel + ε; inc = lr·g/√d; momentum > 0: mom = momentum·mom + inc, w -= mom; else w -= inc.
TEST(KerasOptimizersTest, RmspropFollowsKerasPlainWithMomentumAndCentered) {
  for (const float momentum : {0.0f, 0.5f}) {
    for (const bool centered : {false, true}) {
      const size_t slots = 3;
      expect_matches({.name = "rmsprop", .momentum = momentum, .rho = 0.8f, .centered = centered},
                     slots, [&](Reference& r, double g, double lr, int) {
                       const double rho = static_cast<float>(0.8);
                       double& vel = r.slots[0];
                       double& mom = r.slots[1];
                       double& avg = r.slots[2];
                       vel = rho * vel + (1 - rho) * g * g;
                       double d = vel + 1e-7;
                       if (centered) {
                         avg = rho * avg + (1 - rho) * g;
                         d = vel - avg * avg + 1e-7;
                       }
                       const double inc = lr * g / std::sqrt(d);
                       if (momentum > 0) {
                         mom = momentum * mom + inc;
                         r.value -= mom;
                       } else {
                         r.value -= inc;
                       }
                     });
    }
  }
}

// The example of Keras' RMSprop docstring: lr 0.1, var 10, loss var²/2 (so g = var): 9.683772.
TEST(KerasOptimizersTest, RmspropTakesKerasDocumentedFirstStep) {
  const std::vector<ParamSpec> one = {ParamSpec{.name = "var1", .shape = {1}}};
  ParamSet params(one), grads(one);
  params.values(0)[0] = 10.0f;
  grads.values(0)[0] = 10.0f;
  make_optimizer({.name = "rmsprop"}, one)->apply(params, grads, 0.1f, 0);
  EXPECT_NEAR(params.values(0)[0], 9.683772, 1e-5);
}

// adamw.py is adam.py after BaseOptimizer._apply_weight_decay (w -= w·wd·lr), ε = 1e-7 and
// wd = 0.004 by default: α = lr·√(1-β2^t)/(1-β1^t); m += (g-m)(1-β1); v += (g²-v)(1-β2);
// w -= α·m/(√v + ε).
TEST(KerasOptimizersTest, AdamwDecaysTheWeightThenTakesAdamsStep) {
  expect_matches({.name = "adamw"}, 2, [](Reference& r, double g, double lr, int step) {
    const double b1 = static_cast<float>(0.9), b2 = static_cast<float>(0.999);
    const double t = step + 1;
    r.value -= r.value * static_cast<float>(0.004) * lr;
    double& m = r.slots[0];
    double& v = r.slots[1];
    m += (g - m) * (1 - b1);
    v += (g * g - v) * (1 - b2);
    const double alpha = lr * std::sqrt(1 - std::pow(b2, t)) / (1 - std::pow(b1, t));
    r.value -= alpha * m / (std::sqrt(v) + static_cast<float>(1e-7));
  });
  auto adamw = make_optimizer({.name = "adamw"}, keras_layout());
  EXPECT_EQ(adamw->slots().at(0).spec(0).name, "kernel/momentum");
  EXPECT_EQ(adamw->slots().at(1).spec(0).name, "kernel/velocity");
}

// adagrad.py: the accumulator starts at initial_accumulator_value; acc += g²;
// w -= lr·g/√(acc + ε).
TEST(KerasOptimizersTest, AdagradAccumulatesFromItsInitialValue) {
  expect_matches(
      {.name = "adagrad", .initial_accumulator_value = 0.25f}, 1,
      [](Reference& r, double g, double lr, int) {
        double& acc = r.slots[0];
        acc += g * g;
        r.value -= lr * g / std::sqrt(acc + static_cast<float>(1e-7));
      },
      0.25);
  auto adagrad = make_optimizer({.name = "adagrad"}, keras_layout());
  EXPECT_FLOAT_EQ(adagrad->slots().at(0).values(1)[4], 0.1f);  // Keras' default
}

// nadam.py: u_t = β1(1 - 0.5·0.96^t), Π_t = Π_{i≤t} u_i; m += (g-m)(1-β1); v += (g²-v)(1-β2);
// m̂ = u_{t+1}·m/(1 - Π_t·u_{t+1}) + (1-u_t)·g/(1-Π_t); v̂ = v/(1-β2^t); w -= lr·m̂/(√v̂ + ε).
double nadam_reference_step(Reference& r, double g, double lr, int64_t t, double& product) {
  const double b1 = static_cast<float>(0.9), b2 = static_cast<float>(0.999);
  const double u_t = b1 * (1 - 0.5 * std::pow(0.96, double(t)));
  const double u_next = b1 * (1 - 0.5 * std::pow(0.96, double(t + 1)));
  product *= u_t;
  double& m = r.slots[0];
  double& v = r.slots[1];
  m += (g - m) * (1 - b1);
  v += (g * g - v) * (1 - b2);
  const double m_hat = u_next * m / (1 - product * u_next) + (1 - u_t) * g / (1 - product);
  const double v_hat = v / (1 - std::pow(b2, double(t)));
  r.value -= lr * m_hat / (std::sqrt(v_hat) + static_cast<float>(1e-7));
  return r.value;
}

TEST(KerasOptimizersTest, NadamFollowsKerasMomentumSchedule) {
  expect_matches({.name = "nadam"}, 2, [](Reference& r, double g, double lr, int step) {
    const int64_t t = step + 1;
    double product = 1.0;  // Π_{i<t} u_i: the reference step multiplies u_t in
    for (int64_t i = 1; i < t; ++i)
      product *= static_cast<float>(0.9) * (1 - 0.5 * std::pow(0.96, double(i)));
    nadam_reference_step(r, g, lr, t, product);
  });
}

// Far into a run the schedule's product is still Keras' (dtrain computes it from the step).
TEST(KerasOptimizersTest, NadamScheduleHoldsPastAThousandSteps) {
  const std::vector<ParamSpec> one = {ParamSpec{.name = "w", .shape = {1}}};
  ParamSet params(one), grads(one);
  params.values(0)[0] = 1.0f;
  grads.values(0)[0] = 0.5f;
  auto nadam = make_optimizer({.name = "nadam"}, one);
  // The slots as a run of 1500 steps of this constant gradient leaves them.
  Reference r{1.0, {0.0, 0.0}};
  double product = 1.0;
  for (int64_t t = 1; t <= 1500; ++t) nadam_reference_step(r, 0.5, 1e-3, t, product);
  nadam->slots()[0].values(0)[0] = static_cast<float>(r.slots[0]);
  nadam->slots()[1].values(0)[0] = static_cast<float>(r.slots[1]);
  params.values(0)[0] = static_cast<float>(r.value);
  Reference next{static_cast<float>(r.value),
                 {static_cast<float>(r.slots[0]), static_cast<float>(r.slots[1])}};
  nadam_reference_step(next, 0.5, 1e-3, 1501, product);
  nadam->apply(params, grads, 1e-3f, 1500);
  EXPECT_NEAR(params.values(0)[0], next.value, kTolerance);
}

// BaseOptimizer applies weight decay to the model's trainable variables only: a statistic
// (BatchNorm's moving mean) takes its delta and nothing else.
TEST(KerasOptimizersTest, WeightDecayLeavesStatisticsAlone) {
  const std::vector<ParamSpec> specs = {
      ParamSpec{.name = "w", .shape = {4}},
      ParamSpec{.name = "mean", .shape = {4}, .trainable = false}};
  ParamSet params(specs), grads(specs);
  for (size_t i = 0; i < 2; ++i) {
    for (float& x : params.values(i)) x = 2.0f;
  }
  make_optimizer({.name = "sgd", .weight_decay = 0.5f}, specs)->apply(params, grads, 0.1f, 0);
  EXPECT_FLOAT_EQ(params.values(0)[0], 2.0f - 2.0f * 0.5f * 0.1f);
  EXPECT_FLOAT_EQ(params.values(1)[0], 2.0f);
}

// base_optimizer.py's _clip_gradients: clipnorm g·c/max(‖g‖, c) per variable, global_clipnorm
// over all of them, clipvalue per value; a statistic's delta is never clipped.
TEST(KerasOptimizersTest, ClippingFollowsKerasAndLeavesStatisticsAlone) {
  const std::vector<ParamSpec> specs = {
      ParamSpec{.name = "w", .shape = {2}}, ParamSpec{.name = "b", .shape = {1}},
      ParamSpec{.name = "mean", .shape = {2}, .trainable = false}};
  const auto clipped = [&](const OptimizerConfig& config) {
    GradSet grads(specs);
    grads.values(0)[0] = 3.0f;  // ‖w‖ = 5
    grads.values(0)[1] = -4.0f;
    grads.values(1)[0] = 0.5f;  // ‖b‖ = 0.5, below every bound
    grads.values(2)[0] = 30.0f;
    grads.values(2)[1] = -40.0f;
    const auto optimizer = make_optimizer(config, specs);
    EXPECT_TRUE(optimizer->clips());
    optimizer->clip(grads);
    return std::vector<float>{grads.values(0)[0], grads.values(0)[1], grads.values(1)[0],
                              grads.values(2)[0], grads.values(2)[1]};
  };
  EXPECT_THAT(clipped({.name = "sgd", .clipnorm = 1.0f}),
              ::testing::Pointwise(::testing::FloatEq(), {0.6f, -0.8f, 0.5f, 30.0f, -40.0f}));
  // Global norm √(25 + 0.25): every trainable gradient scaled alike.
  const float scale = static_cast<float>(1.0 / std::sqrt(25.25));
  EXPECT_THAT(clipped({.name = "sgd", .global_clipnorm = 1.0f}),
              ::testing::Pointwise(::testing::FloatEq(),
                                   {3 * scale, -4 * scale, 0.5f * scale, 30.0f, -40.0f}));
  EXPECT_THAT(clipped({.name = "sgd", .clipvalue = 1.0f}),
              ::testing::Pointwise(::testing::FloatEq(), {1.0f, -1.0f, 0.5f, 30.0f, -40.0f}));
  EXPECT_FALSE(make_optimizer({.name = "sgd", .clipnorm = 1.0f}, specs)->plain_sgd());
}

TEST(KerasOptimizersTest, OutOfRangeSettingsAreRefusedByFlag) {
  const auto refusal = [](const OptimizerConfig& config) -> std::string {
    try {
      make_optimizer(config, keras_layout());
    } catch (const UsageError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_THAT(refusal({.name = "rmsprop", .rho = 1.5f}), ::testing::HasSubstr("--rho 1.5"));
  EXPECT_THAT(refusal({.name = "sgd", .momentum = -0.1f}), ::testing::HasSubstr("--momentum"));
  EXPECT_THAT(refusal({.name = "adam", .clipnorm = 1.0f, .clipvalue = 0.5f}),
              ::testing::HasSubstr("--clipnorm 1 and --clipvalue 0.5: choose one"));
}

}  // namespace
}  // namespace dtrain
