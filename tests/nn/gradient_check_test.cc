// Finite-difference gradient checks for every layer and the loss, plus reference tests that pin
// each layer's forward to a naive loop (Dense, Conv2D) or hand-computed values (Conv2D, MaxPool2D).
// The checks use the scalar loss L = Σ out ⊙ R for a fixed random R, so backward with dout = R must
// give dL/dparams and dL/din.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "base/error.h"
#include "nn/activation.h"
#include "nn/batch_norm.h"
#include "nn/binary_cross_entropy.h"
#include "nn/conv2d.h"
#include "nn/dense.h"
#include "nn/dropout.h"
#include "nn/pool2d.h"
#include "nn/softmax_cross_entropy.h"
#include "tensor/thread_team.h"

namespace dtrain {
namespace {

// Central-difference step on float values. Dense and Conv2D are affine in any single parameter or
// input, and Relu and MaxPool2D are piecewise affine with test inputs kept at least 0.01 (> eps)
// from their kinks and ties, so the difference quotient has no truncation error at all; eps only
// has to be large against float32 rounding of the outputs.
constexpr float kEps = 1e-3f;

// Accepted error: |analytic - numeric| / max(|analytic|, |numeric|, 1). L is summed in double and
// the outputs a perturbation does not touch come out bit-identical in both runs, so the numeric
// derivative's only error is the float32 rounding δ of the T outputs it touches, ≈ √T·δ/(2·eps).
// For a Conv2D input, T = K·K·C_out ≈ 50 outputs, each a sum of ≈ 100 float products (δ ≈ 1e-6),
// gives a few 1e-3 at worst; the largest error measured over these cases is 5.6e-4 (Conv2D K4, an
// input gradient), Dense's 5e-5, and Relu, Flatten and MaxPool2D are exact. 5e-3 sits well above
// that noise while a wrong backward — a zeroed, dropped or 5% mis-scaled gradient — errs by 5e-2
// or more (see HarnessRejects). The floor of 1 keeps near-zero gradients from turning rounding
// noise into a large ratio.
constexpr double kTolerance = 5e-3;

// Written into gradient buffers before backward, to prove that backward overwrites them.
constexpr float kStaleGradient = 12345.0f;

std::vector<float> uniform(size_t n, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Values of magnitude in [0.1, 1) with random signs: none within eps of ReLU's kink at 0.
std::vector<float> away_from_zero(size_t n, std::mt19937& rng) {
  std::vector<float> v = uniform(n, 0.1f, 1.0f, rng);
  std::bernoulli_distribution negative(0.5);
  for (float& x : v) x = negative(rng) ? -x : x;
  return v;
}

// A shuffled ladder 0.01 apart: no ties, and no eps-perturbation can change which input is largest.
std::vector<float> distinct_values(size_t n, std::mt19937& rng) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 0.01f * static_cast<float>(i) - 0.005f * n;
  std::shuffle(v.begin(), v.end(), rng);
  return v;
}

void fill_params(ParamSet& params, std::mt19937& rng) {
  for (size_t i = 0; i < params.count(); ++i) {
    std::vector<float> v = uniform(params.values(i).size(), -1.0f, 1.0f, rng);
    std::copy(v.begin(), v.end(), params.values(i).begin());
  }
}

size_t batch_floats(const Shape& shape, int batch) {
  return static_cast<size_t>(batch) * static_cast<size_t>(num_elements(shape));
}

// The step seed of training passes in these checks: every forward of a check draws the same
// dropout mask, so the loss is a fixed function of the parameters and inputs.
constexpr uint64_t kStepSeed = 7;

// Runs forward on its own output and scratch buffers, exactly sized so ASan catches overruns.
std::vector<float> run_forward(const Layer& layer, const ParamSet& params, int batch,
                               const std::vector<float>& in, std::vector<float>& scratch,
                               bool training = false) {
  std::vector<float> out(batch_floats(layer.output_shape(), batch));
  scratch.assign(layer.scratch_floats(batch), 0.0f);
  layer.forward(params, {.batch = batch,
                         .in = in.data(),
                         .out = out.data(),
                         .scratch = scratch.data(),
                         .training = training,
                         .seed = kStepSeed});
  return out;
}

struct GradCheckResult {
  double worst_error = 0.0;  // as defined for kTolerance; infinity for a non-finite gradient
  std::string worst_entry;   // e.g. "conv_w[17]" or "input[3]"
  size_t checked = 0;
};

// Compares layer.backward against central differences of L = Σ out ⊙ r for every parameter value
// and every input value; a statistic (ParamSpec::trainable false) is no function of L and its
// slot holds a delta, so it is left out. REQUIRES: layer.set_first_param(0) was called; params
// match its specs.
GradCheckResult check_gradients(const Layer& layer, int batch, std::vector<float> in,
                                ParamSet& params, uint32_t seed, bool training = false) {
  std::mt19937 rng(seed);
  const std::vector<float> r = uniform(batch_floats(layer.output_shape(), batch), -1.0f, 1.0f, rng);

  std::vector<float> scratch;
  const std::vector<float> out = run_forward(layer, params, batch, in, scratch, training);
  GradSet grads(layer.param_specs());
  std::fill(grads.flat().begin(), grads.flat().end(), kStaleGradient);
  std::vector<float> din(in.size(), kStaleGradient);
  layer.backward(params, grads,
                 {.batch = batch,
                  .in = in.data(),
                  .out = const_cast<float*>(out.data()),
                  .scratch = scratch.data(),
                  .training = training,
                  .seed = kStepSeed},
                 r.data(), din.data());

  auto loss = [&]() {
    std::vector<float> probe_scratch;
    const std::vector<float> probe = run_forward(layer, params, batch, in, probe_scratch, training);
    double sum = 0.0;
    for (size_t i = 0; i < probe.size(); ++i) sum += static_cast<double>(probe[i]) * r[i];
    return sum;
  };
  GradCheckResult result;
  // Perturbs value in place; the step is what float actually stored, not the nominal 2·eps.
  auto compare = [&](float& value, float analytic, const std::string& entry) {
    const float saved = value;
    value = saved + kEps;
    const double plus_at = value;
    const double plus = loss();
    value = saved - kEps;
    const double minus_at = value;
    const double minus = loss();
    value = saved;
    const double numeric = (plus - minus) / (plus_at - minus_at);
    const double scale =
        std::max({std::fabs(static_cast<double>(analytic)), std::fabs(numeric), 1.0});
    double error = std::fabs(analytic - numeric) / scale;
    if (!std::isfinite(error)) error = std::numeric_limits<double>::infinity();
    ++result.checked;
    if (error > result.worst_error || result.worst_entry.empty()) {
      result.worst_error = error;
      result.worst_entry = fmt::format("{}: analytic {} numeric {}", entry, analytic, numeric);
    }
  };
  for (size_t p = 0; p < params.count(); ++p) {
    if (!params.spec(p).trainable) continue;
    std::span<float> values = params.values(p);
    for (size_t i = 0; i < values.size(); ++i) {
      compare(values[i], grads.values(p)[i], fmt::format("{}[{}]", params.spec(p).name, i));
    }
  }
  for (size_t i = 0; i < in.size(); ++i) compare(in[i], din[i], fmt::format("input[{}]", i));
  return result;
}

// Builds the ParamSet, fills it and checks; for the common case of random parameters.
GradCheckResult check_layer(Layer& layer, int batch, const std::vector<float>& in, uint32_t seed,
                            bool training = false) {
  std::mt19937 rng(seed);
  ParamSet params(layer.param_specs());
  layer.set_first_param(0);
  fill_params(params, rng);
  return check_gradients(layer, batch, in, params, seed + 1, training);
}

#define EXPECT_GRADIENTS_MATCH(result)                               \
  do {                                                               \
    const GradCheckResult& r_ = (result);                            \
    EXPECT_GT(r_.checked, 0u);                                       \
    EXPECT_LE(r_.worst_error, kTolerance)                            \
        << "worst entry " << r_.worst_entry << " of " << r_.checked; \
  } while (0)

// ---------------------------------------------------------------------------------------------
// The harness itself: it must reject a backward that is wrong.

enum class Fault { kZeroBiasGradient, kScaleInputGradient, kZeroInputGradient };

// Dense with one deliberate bug in backward.
class FaultyDense : public Layer {
 public:
  FaultyDense(DenseOptions options, Fault fault) : dense_(std::move(options)), fault_(fault) {}
  std::string describe() const override { return "faulty " + dense_.describe(); }
  Shape input_shape() const override { return dense_.input_shape(); }
  Shape output_shape() const override { return dense_.output_shape(); }
  std::vector<ParamSpec> param_specs() const override { return dense_.param_specs(); }
  void forward(const ParamSet& params, const LayerIo& io) const override {
    dense_.forward(params, io);
  }
  void backward(const ParamSet& params, GradSet& grads, const LayerIo& io, const float* dout,
                float* din) const override {
    dense_.backward(params, grads, io, dout, din);
    const size_t in_floats = batch_floats(input_shape(), io.batch);
    std::span<float> db = grads.values(1);
    switch (fault_) {
      case Fault::kZeroBiasGradient:
        std::fill(db.begin(), db.end(), 0.0f);
        break;
      case Fault::kScaleInputGradient:
        for (size_t i = 0; i < in_floats; ++i) din[i] *= 1.05f;
        break;
      case Fault::kZeroInputGradient:
        std::fill_n(din, in_floats, 0.0f);
        break;
    }
  }

 private:
  Dense dense_;
  Fault fault_;
};

class HarnessRejects : public ::testing::TestWithParam<Fault> {};

TEST_P(HarnessRejects, ABackwardWithADeliberateBug) {
  FaultyDense layer({.in_features = 5, .out_features = 4, .weight_name = "w", .bias_name = "b"},
                    GetParam());
  std::mt19937 rng(1);
  const GradCheckResult result = check_layer(layer, 3, uniform(15, -1, 1, rng), 2);
  EXPECT_GT(result.worst_error, kTolerance);
}

INSTANTIATE_TEST_SUITE_P(GradientCheck, HarnessRejects,
                         ::testing::Values(Fault::kZeroBiasGradient, Fault::kScaleInputGradient,
                                           Fault::kZeroInputGradient));

// ---------------------------------------------------------------------------------------------
// Gradient checks, one per layer.

TEST(GradientCheck, DenseMatchesFiniteDifferences) {
  Dense layer({.in_features = 6, .out_features = 4, .weight_name = "w", .bias_name = "b"});
  std::mt19937 rng(10);
  EXPECT_GRADIENTS_MATCH(check_layer(layer, 3, uniform(18, -1, 1, rng), 11));
}

TEST(GradientCheck, ReluMatchesFiniteDifferencesAwayFromZero) {
  Relu layer({2, 3, 4});
  std::mt19937 rng(20);
  EXPECT_GRADIENTS_MATCH(check_layer(layer, 2, away_from_zero(48, rng), 21));
}

TEST(GradientCheck, FlattenMatchesFiniteDifferences) {
  Flatten layer({2, 3, 2});
  std::mt19937 rng(30);
  EXPECT_GRADIENTS_MATCH(check_layer(layer, 2, uniform(24, -1, 1, rng), 31));
}

// tanh and sigmoid are smooth: their truncation error over ±eps is ≈ eps²·|f'''|/6 ≈ 1e-7, far
// below the tolerance.
TEST(GradientCheck, TanhMatchesFiniteDifferences) {
  Tanh layer({3, 4});
  std::mt19937 rng(32);
  EXPECT_GRADIENTS_MATCH(check_layer(layer, 2, uniform(24, -2, 2, rng), 33));
}

TEST(GradientCheck, SigmoidMatchesFiniteDifferences) {
  Sigmoid layer({3, 4});
  std::mt19937 rng(34);
  EXPECT_GRADIENTS_MATCH(check_layer(layer, 2, uniform(24, -3, 3, rng), 35));
}

TEST(GradientCheck, ReshapeMatchesFiniteDifferences) {
  Reshape layer({12}, {2, 3, 2});
  std::mt19937 rng(36);
  EXPECT_GRADIENTS_MATCH(check_layer(layer, 2, uniform(24, -1, 1, rng), 37));
}

TEST(GradientCheck, DropoutInTrainingMatchesFiniteDifferencesOfItsMaskedForward) {
  Dropout layer({5, 6}, 0.4f);
  std::mt19937 rng(38);
  EXPECT_GRADIENTS_MATCH(check_layer(layer, 3, uniform(90, -1, 1, rng), 39, /*training=*/true));
}

BatchNormOptions batch_norm_options(Shape shape, bool center = true, bool scale = true) {
  return {.shape = std::move(shape),
          .momentum = 0.9f,
          .gamma_name = scale ? "bn/gamma" : "",
          .beta_name = center ? "bn/beta" : "",
          .moving_mean_name = "bn/moving_mean",
          .moving_variance_name = "bn/moving_variance"};
}

// In training the batch's own statistics normalise, so every output depends on every input of
// its channel: the checks cover that coupling, after a Dense (flat) and a Conv2D (per channel of
// an image, over the batch and every position).
TEST(GradientCheck, BatchNormAfterADenseMatchesFiniteDifferencesInTraining) {
  BatchNorm layer(batch_norm_options({5}));
  std::mt19937 rng(11);
  EXPECT_GRADIENTS_MATCH(check_layer(layer, 4, uniform(20, -1, 1, rng), 12, /*training=*/true));
}

TEST(GradientCheck, BatchNormOfImageChannelsMatchesFiniteDifferencesInTraining) {
  BatchNorm layer(batch_norm_options({3, 2, 4}));
  std::mt19937 rng(13);
  EXPECT_GRADIENTS_MATCH(check_layer(layer, 2, uniform(48, -1, 1, rng), 14, /*training=*/true));
}

TEST(GradientCheck, BatchNormWithoutScaleAndCentreMatchesFiniteDifferencesInTraining) {
  BatchNorm layer(batch_norm_options({2, 2, 3}, /*center=*/false, /*scale=*/false));
  EXPECT_EQ(layer.param_specs().size(), 2u);
  std::mt19937 rng(15);
  EXPECT_GRADIENTS_MATCH(check_layer(layer, 3, uniform(36, -1, 1, rng), 16, /*training=*/true));
}

// Keras' semantics on hand-computed values: one channel holding 1, 3 and another holding 2, 6,
// momentum 0.9, epsilon 1e-3.
TEST(BatchNorm, TrainingNormalisesByTheBatchAndItsDeltaMovesTheMovingStatisticsAsKeras) {
  BatchNorm layer(batch_norm_options({2}));
  layer.set_first_param(0);
  ParamSet params(layer.param_specs());
  const std::vector<float> gamma{2, 1}, beta{0.5f, 0}, moving_mean{1, -1}, moving_var{4, 0.5f};
  std::copy(gamma.begin(), gamma.end(), params.values(0).begin());
  std::copy(beta.begin(), beta.end(), params.values(1).begin());
  std::copy(moving_mean.begin(), moving_mean.end(), params.values(2).begin());
  std::copy(moving_var.begin(), moving_var.end(), params.values(3).begin());
  EXPECT_FALSE(params.spec(2).trainable);
  EXPECT_FALSE(params.spec(3).trainable);
  EXPECT_TRUE(params.spec(0).trainable);

  const std::vector<float> in{1, 2, 3, 6};  // rows (1, 2) and (3, 6)
  std::vector<float> scratch;
  const std::vector<float> out = run_forward(layer, params, 2, in, scratch, /*training=*/true);
  // Channel 0: mean 2, variance 1; channel 1: mean 4, variance 4.
  const float s0 = 1 / std::sqrt(1.001f), s1 = 1 / std::sqrt(4.001f);
  EXPECT_NEAR(out[0], 2 * -1 * s0 + 0.5f, 1e-6);
  EXPECT_NEAR(out[2], 2 * 1 * s0 + 0.5f, 1e-6);
  EXPECT_NEAR(out[1], -2 * s1, 1e-6);
  EXPECT_NEAR(out[3], 2 * s1, 1e-6);

  GradSet grads(layer.param_specs());
  const std::vector<float> dout(4, 0.0f);
  layer.backward(params, grads,
                 {.batch = 2,
                  .in = in.data(),
                  .out = const_cast<float*>(out.data()),
                  .scratch = scratch.data(),
                  .training = true},
                 dout.data(), nullptr);
  // value -= delta is Keras' moving = 0.9·moving + 0.1·batch statistic (variance biased).
  for (size_t p : {2u, 3u}) {
    for (size_t k = 0; k < 2; ++k) params.values(p)[k] -= grads.values(p)[k];
  }
  EXPECT_NEAR(params.values(2)[0], 0.9f * 1 + 0.1f * 2, 1e-6);
  EXPECT_NEAR(params.values(2)[1], 0.9f * -1 + 0.1f * 4, 1e-6);
  EXPECT_NEAR(params.values(3)[0], 0.9f * 4 + 0.1f * 1, 1e-6);
  EXPECT_NEAR(params.values(3)[1], 0.9f * 0.5f + 0.1f * 4, 1e-6);
}

TEST(BatchNorm, EvaluationNormalisesByTheMovingStatistics) {
  BatchNorm layer(batch_norm_options({3, 1, 2}));
  layer.set_first_param(0);
  ParamSet params(layer.param_specs());
  std::mt19937 rng(17);
  fill_params(params, rng);
  for (float& v : params.values(3)) v = std::fabs(v) + 0.1f;  // variances
  const std::vector<float> in = uniform(12, -1, 1, rng);
  std::vector<float> scratch;
  const std::vector<float> out = run_forward(layer, params, 2, in, scratch, /*training=*/false);
  for (size_t i = 0; i < in.size(); ++i) {
    const size_t k = i % 2;
    const float expected = params.values(0)[k] * (in[i] - params.values(2)[k]) /
                               std::sqrt(params.values(3)[k] + 1e-3f) +
                           params.values(1)[k];
    EXPECT_NEAR(out[i], expected, 1e-5) << i;
  }
}

// A plain SGD step folded into backward descends gamma and beta but assigns the statistics.
TEST(BatchNorm, TheFoldedSgdStepAssignsTheStatisticsAtNoLearningRate) {
  BatchNorm layer(batch_norm_options({2}));
  layer.set_first_param(0);
  ParamSet params(layer.param_specs());
  std::mt19937 rng(19);
  fill_params(params, rng);
  ParamSet expected(layer.param_specs());
  expected.copy_from(params);
  const std::vector<float> in = uniform(8, -1, 1, rng), dout = uniform(8, -1, 1, rng);
  std::vector<float> scratch;
  const std::vector<float> out = run_forward(layer, params, 4, in, scratch, /*training=*/true);
  const LayerIo io{.batch = 4,
                   .in = in.data(),
                   .out = const_cast<float*>(out.data()),
                   .scratch = scratch.data(),
                   .training = true};
  GradSet grads(layer.param_specs());
  layer.backward(expected, grads, io, dout.data(), nullptr);
  for (size_t p = 0; p < 4; ++p) {
    for (size_t k = 0; k < 2; ++k)
      expected.values(p)[k] -= (p < 2 ? 0.5f : 1.0f) * grads.values(p)[k];
  }
  GradSet scratch_grads(layer.param_specs());
  layer.backward_sgd_step(params, scratch_grads, io, dout.data(), nullptr, 0.5f);
  for (size_t p = 0; p < 4; ++p) {
    for (size_t k = 0; k < 2; ++k)
      EXPECT_FLOAT_EQ(params.values(p)[k], expected.values(p)[k]) << params.spec(p).name;
  }
}

TEST(BinaryCrossEntropy, MatchesTheLogLossOfTheSigmoidAndItsCentralDifferences) {
  const std::vector<float> logits{-3.0f, -0.2f, 0.0f, 0.7f, 25.0f};
  const std::vector<int32_t> labels{0, 1, 1, 0, 1};
  std::vector<float> dlogits(5);
  const float loss = binary_cross_entropy(logits.data(), labels.data(), 5, dlogits.data());
  double expected = 0;
  for (size_t i = 0; i < 5; ++i) {
    const double p = 1 / (1 + std::exp(-static_cast<double>(logits[i])));
    expected -= labels[i] == 1 ? std::log(p) : std::log(1 - p);
  }
  EXPECT_NEAR(loss, expected / 5, 1e-6);
  for (size_t i = 0; i < 5; ++i) {
    std::vector<float> plus = logits, minus = logits;
    plus[i] += 1e-2f;
    minus[i] -= 1e-2f;
    const double numeric = (binary_cross_entropy(plus.data(), labels.data(), 5, nullptr) -
                            binary_cross_entropy(minus.data(), labels.data(), 5, nullptr)) /
                           (static_cast<double>(plus[i]) - minus[i]);
    EXPECT_NEAR(dlogits[i], numeric, 1e-4) << i;
  }
  // A logit of -100 with label 1 costs 100, not an infinity.
  const float far = -100.0f;
  const int32_t one = 1;
  EXPECT_NEAR(binary_cross_entropy(&far, &one, 1, nullptr), 100.0f, 1e-3);
  std::vector<int32_t> predicted(5);
  threshold_logits(logits.data(), 5, predicted.data());
  EXPECT_EQ(predicted, (std::vector<int32_t>{0, 0, 1, 1, 1}));
}

// Keras's sample_weight ("sum_over_batch_size"): Σ w·loss / N, and the gradient of that, checked
// against a computation in double written here and against central differences.
TEST(WeightedLoss, EachExampleCountsItsWeightAndTheMeanIsOverTheBatch) {
  const int n = 4, classes = 3;
  const std::vector<float> logits{0.5f, -1.0f, 2.0f, 0.0f, 0.3f, -0.7f,
                                  1.5f, 1.5f,  0.1f, -2.f, 0.4f, 0.9f};
  const std::vector<int32_t> labels{2, 0, 1, 2};
  const std::vector<float> weights{1.0f, 0.0f, 2.5f, 0.25f};
  std::vector<float> dlogits(logits.size());
  const float loss = softmax_cross_entropy(logits.data(), labels.data(), n, classes, dlogits.data(),
                                           weights.data());
  double expected = 0;
  for (int r = 0; r < n; ++r) {
    double sum = 0;
    for (int c = 0; c < classes; ++c) sum += std::exp(double{logits[r * classes + c]});
    expected += weights[r] * -std::log(std::exp(double{logits[r * classes + labels[r]]}) / sum);
  }
  EXPECT_NEAR(loss, expected / n, 1e-6);
  for (size_t i = 0; i < logits.size(); ++i) {
    std::vector<float> plus = logits, minus = logits;
    plus[i] += 1e-2f;
    minus[i] -= 1e-2f;
    const auto at = [&](const std::vector<float>& l) {
      return softmax_cross_entropy(l.data(), labels.data(), n, classes, nullptr, weights.data());
    };
    EXPECT_NEAR(dlogits[i], (at(plus) - at(minus)) / (double{plus[i]} - minus[i]), 1e-4) << i;
  }
  for (int c = 0; c < classes; ++c) EXPECT_EQ(dlogits[classes + c], 0.0f) << "weight 0";
  // Weights of 1 are the unweighted mean, bit for bit (the command line's runs stay as they were).
  const std::vector<float> ones(n, 1.0f);
  std::vector<float> plain(logits.size()), weighed(logits.size());
  EXPECT_EQ(
      softmax_cross_entropy(logits.data(), labels.data(), n, classes, plain.data()),
      softmax_cross_entropy(logits.data(), labels.data(), n, classes, weighed.data(), ones.data()));
  EXPECT_EQ(plain, weighed);
  // The binary head's loss likewise.
  const std::vector<float> binary{-1.0f, 0.5f, 3.0f, 0.0f};
  const std::vector<int32_t> binary_labels{0, 1, 0, 1};
  std::vector<float> dbinary(4);
  double binary_expected = 0;
  for (int r = 0; r < n; ++r) {
    const double p = 1 / (1 + std::exp(-double{binary[r]}));
    binary_expected -= weights[r] * (binary_labels[r] == 1 ? std::log(p) : std::log(1 - p));
  }
  EXPECT_NEAR(
      binary_cross_entropy(binary.data(), binary_labels.data(), n, dbinary.data(), weights.data()),
      binary_expected / n, 1e-6);
  EXPECT_EQ(dbinary[1], 0.0f);
  const double p2 = 1 / (1 + std::exp(-3.0));
  EXPECT_NEAR(dbinary[2], 2.5 * p2 / n, 1e-6);
}

TEST(GradientCheck, DenseWithoutBiasMatchesFiniteDifferences) {
  Dense layer({.in_features = 5, .out_features = 3, .weight_name = "w", .bias_name = ""});
  ASSERT_EQ(layer.param_specs().size(), 1u);
  std::mt19937 rng(12);
  EXPECT_GRADIENTS_MATCH(check_layer(layer, 3, uniform(15, -1, 1, rng), 13));
}

struct ConvCase {
  int height, width, in_channels, out_channels, kernel;
  int kernel_width = 0;  // 0: square, = kernel
  int stride_height = 1;
  int stride_width = 1;
  Padding padding = Padding::kSame;
  ConvImplementation implementation = ConvImplementation::kAuto;

  int kw() const { return kernel_width > 0 ? kernel_width : kernel; }
};

Conv2D make_conv(const ConvCase& c) {
  return Conv2D({.height = c.height,
                 .width = c.width,
                 .in_channels = c.in_channels,
                 .out_channels = c.out_channels,
                 .kernel_height = c.kernel,
                 .kernel_width = c.kw(),
                 .stride_height = c.stride_height,
                 .stride_width = c.stride_width,
                 .padding = c.padding,
                 .weight_name = "conv_w",
                 .bias_name = "conv_b",
                 .implementation = c.implementation});
}

// A case as the test runs it: under each implementation Conv2D can choose.
using ConvParam = std::tuple<ConvCase, ConvImplementation>;
ConvCase with_implementation(const ConvParam& param) {
  ConvCase c = std::get<0>(param);
  c.implementation = std::get<1>(param);
  return c;
}

std::string conv_case_name(const ::testing::TestParamInfo<ConvParam>& info) {
  const ConvCase c = with_implementation(info.param);
  return fmt::format("H{}W{}C{}to{}K{}x{}S{}x{}{}_{}", c.height, c.width, c.in_channels,
                     c.out_channels, c.kernel, c.kw(), c.stride_height, c.stride_width,
                     c.padding == Padding::kSame ? "Same" : "Valid",
                     conv_implementation_name(c.implementation));
}

// 5x5x2 → 3 with kernels 3 and 5 (the kernel as large as the image, so every patch is clipped),
// an even kernel whose SAME padding is asymmetric, a non-square image and a 1x1 kernel; then
// strides: SAME with stride 2 on odd and even sizes (padding split unevenly, or none at all),
// rectangular kernels with unequal strides, VALID padding with strides that leave input rows
// unread, and VALID with a kernel as large as the image.
const auto kConvCases = ::testing::Values(
    ConvCase{5, 5, 2, 3, 3}, ConvCase{5, 5, 2, 3, 5}, ConvCase{6, 5, 2, 3, 4},
    ConvCase{4, 7, 3, 2, 3}, ConvCase{3, 4, 2, 2, 1}, ConvCase{7, 6, 2, 3, 3, 3, 2, 2},
    ConvCase{6, 7, 2, 2, 2, 3, 2, 3}, ConvCase{5, 7, 2, 3, 3, 2, 1, 2},
    ConvCase{7, 6, 2, 3, 3, 2, 2, 3, Padding::kValid},
    ConvCase{6, 6, 1, 2, 2, 2, 2, 2, Padding::kValid},
    ConvCase{4, 5, 2, 2, 4, 5, 1, 1, Padding::kValid},
    // Eight input channels and more, where auto takes oneDNN's vectorised kernels.
    ConvCase{5, 5, 8, 3, 3}, ConvCase{6, 5, 16, 4, 4, 4, 2, 2});
// auto too: from 8 to 31 input channels it runs oneDNN's forward with im2col's backward.
const auto kConvImplementations = ::testing::Values(
    ConvImplementation::kIm2col, ConvImplementation::kOneDnn, ConvImplementation::kAuto);

// The direct kernels take output channels 16 at a time, 32 where they can: 16, 32 and 48 (a pair
// and a single block). Rows of outputs go in strips, here with a last partial strip (29 columns),
// and kernel rows of 15 taps (3 channels × 5) in groups with a partial last one; strides and
// VALID padding as above.
const auto kDirectConvCases =
    ::testing::Values(ConvCase{5, 5, 1, 16, 3}, ConvCase{6, 5, 2, 48, 4}, ConvCase{3, 29, 1, 16, 3},
                      ConvCase{6, 6, 3, 32, 5}, ConvCase{7, 6, 3, 16, 3, 3, 2, 2},
                      ConvCase{7, 6, 2, 32, 3, 2, 2, 3, Padding::kValid},
                      ConvCase{4, 5, 1, 16, 4, 5, 1, 1, Padding::kValid});

class Conv2DGradient : public ::testing::TestWithParam<ConvParam> {};

TEST_P(Conv2DGradient, MatchesFiniteDifferences) {
  Conv2D layer = make_conv(with_implementation(GetParam()));
  std::mt19937 rng(40);
  const int batch = 2;
  const std::vector<float> in = uniform(batch_floats(layer.input_shape(), batch), -1.0f, 1.0f, rng);
  EXPECT_GRADIENTS_MATCH(check_layer(layer, batch, in, 41));
}

INSTANTIATE_TEST_SUITE_P(GradientCheck, Conv2DGradient,
                         ::testing::Combine(kConvCases, kConvImplementations), conv_case_name);
INSTANTIATE_TEST_SUITE_P(Direct, Conv2DGradient,
                         ::testing::Combine(kDirectConvCases,
                                            ::testing::Values(ConvImplementation::kDirect)),
                         conv_case_name);

// Backward computes the input gradient a few images at a time; 9 images spans several such chunks
// and ends on a partial one.
TEST(GradientCheck, Conv2DMatchesFiniteDifferencesOverABatchOfManyImages) {
  Conv2D layer = make_conv({4, 4, 2, 3, 3});
  std::mt19937 rng(42);
  const int batch = 9;
  const std::vector<float> in = uniform(batch_floats(layer.input_shape(), batch), -1.0f, 1.0f, rng);
  EXPECT_GRADIENTS_MATCH(check_layer(layer, batch, in, 43));
}

// With a team, each thread convolves its own images and the weight gradient is a sum of one
// partial per thread: 7 images over 3 threads split 2/2/3, and 2 images over 3 threads leave one
// thread without any.
class Conv2DOnATeam : public ::testing::TestWithParam<ConvImplementation> {};

TEST_P(Conv2DOnATeam, MatchesFiniteDifferencesWhenThreadsSplitTheBatch) {
  const int out_channels = GetParam() == ConvImplementation::kDirect ? 16 : 3;
  Conv2D layer = make_conv({5, 5, 8, out_channels, 3, 0, 1, 1, Padding::kSame, GetParam()});
  ThreadTeam team(3);
  ScopedTeam scope(&team);
  std::mt19937 rng(44);
  for (const int batch : {7, 2}) {
    SCOPED_TRACE(fmt::format("batch {}", batch));
    const std::vector<float> in =
        uniform(batch_floats(layer.input_shape(), batch), -1.0f, 1.0f, rng);
    EXPECT_GRADIENTS_MATCH(check_layer(layer, batch, in, 45));
  }
}

INSTANTIATE_TEST_SUITE_P(GradientCheck, Conv2DOnATeam,
                         ::testing::Values(ConvImplementation::kIm2col, ConvImplementation::kOneDnn,
                                           ConvImplementation::kDirect, ConvImplementation::kAuto),
                         [](const ::testing::TestParamInfo<ConvImplementation>& info) {
                           return std::string(conv_implementation_name(info.param));
                         });

// auto takes oneDNN where it is measured faster (8 input channels and more; below 32 only its
// forward pass, with im2col's backward), the direct kernels below that where they run the shape
// (output channels a multiple of 16), im2col elsewhere; and it names what runs.
TEST(Conv2D, AutoTakesOneDnnFromEightInputChannelsDirectBelowAndIm2colElsewhere) {
  const std::string lenet_conv2 = make_conv({14, 14, 32, 64, 5}).kernels();
  EXPECT_EQ(lenet_conv2.rfind("oneDNN ", 0), 0u) << lenet_conv2;
  EXPECT_EQ(lenet_conv2.find("im2col"), std::string::npos) << lenet_conv2;
  const std::string sixteen = make_conv({14, 14, 16, 32, 5}).kernels();
  EXPECT_EQ(sixteen.rfind("oneDNN ", 0), 0u) << sixteen;
  EXPECT_THAT(sixteen, ::testing::EndsWith(" forward, im2col + OpenBLAS backward"));
  EXPECT_EQ(sixteen.find(" / "), std::string::npos) << "names oneDNN's forward kernel alone";
  EXPECT_EQ(make_conv({28, 28, 1, 32, 5}).kernels().rfind("direct ", 0), 0u)
      << make_conv({28, 28, 1, 32, 5}).kernels();
  EXPECT_EQ(make_conv({28, 28, 4, 48, 5}).kernels().rfind("direct ", 0), 0u);
  EXPECT_EQ(make_conv({28, 28, 4, 20, 5}).kernels(), "im2col + OpenBLAS");
}

TEST(Conv2D, ForcingDirectKernelsOnAShapeTheyDoNotRunNamesTheLayerAndWhy) {
  try {
    make_conv({28, 28, 1, 20, 5, 0, 1, 1, Padding::kSame, ConvImplementation::kDirect});
    FAIL() << "20 output channels were accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("conv2d 'conv_w'"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("20 output channels"));
  }
}

struct PoolCase {
  int height, width, channels, window, stride;
};

std::string pool_case_name(const ::testing::TestParamInfo<PoolCase>& info) {
  const PoolCase& c = info.param;
  return fmt::format("H{}W{}C{}F{}S{}", c.height, c.width, c.channels, c.window, c.stride);
}

// A square window and stride with SAME padding, the tutorial's pooling.
Pool2DOptions square_pool(int height, int width, int channels, int window, int stride) {
  return {.height = height,
          .width = width,
          .channels = channels,
          .pool_height = window,
          .pool_width = window,
          .stride_height = stride,
          .stride_width = stride};
}

class MaxPool2DGradient : public ::testing::TestWithParam<PoolCase> {};

TEST_P(MaxPool2DGradient, MatchesFiniteDifferencesWithoutTies) {
  const PoolCase& c = GetParam();
  MaxPool2D layer(square_pool(c.height, c.width, c.channels, c.window, c.stride));
  std::mt19937 rng(50);
  const int batch = 2;
  EXPECT_GRADIENTS_MATCH(check_layer(
      layer, batch, distinct_values(batch_floats(layer.input_shape(), batch), rng), 51));
}

// Even (VALID-like), odd in both and in one dimension, and overlapping 3x3/2 windows whose SAME
// padding puts a row of padding before the first window.
INSTANTIATE_TEST_SUITE_P(GradientCheck, MaxPool2DGradient,
                         ::testing::Values(PoolCase{4, 4, 3, 2, 2}, PoolCase{5, 5, 2, 2, 2},
                                           PoolCase{5, 4, 2, 2, 2}, PoolCase{7, 7, 2, 3, 2}),
                         pool_case_name);

// Max and average pooling with any window, strides and padding.
struct Pool2DCase {
  int height, width, channels, pool_height, pool_width, stride_height, stride_width;
  Padding padding;
};

Pool2DOptions pool_options(const Pool2DCase& c) {
  return {c.height,     c.width,         c.channels,     c.pool_height,
          c.pool_width, c.stride_height, c.stride_width, c.padding};
}

std::string pool2d_case_name(const ::testing::TestParamInfo<Pool2DCase>& info) {
  const Pool2DCase& c = info.param;
  return fmt::format("H{}W{}C{}P{}x{}S{}x{}{}", c.height, c.width, c.channels, c.pool_height,
                     c.pool_width, c.stride_height, c.stride_width,
                     c.padding == Padding::kSame ? "Same" : "Valid");
}

// SAME with clipped edge windows (odd sizes, 3x3/2 overlapping, rectangular 3x2/1x2), VALID with
// strides that skip the last row or column, and a window as large as the image.
const auto kPool2DCases = ::testing::Values(Pool2DCase{5, 5, 2, 2, 2, 2, 2, Padding::kSame},
                                            Pool2DCase{7, 6, 2, 3, 3, 2, 2, Padding::kSame},
                                            Pool2DCase{5, 6, 2, 3, 2, 1, 2, Padding::kSame},
                                            Pool2DCase{5, 5, 2, 2, 2, 2, 2, Padding::kValid},
                                            Pool2DCase{7, 6, 2, 3, 2, 2, 3, Padding::kValid},
                                            Pool2DCase{4, 3, 2, 4, 3, 1, 1, Padding::kValid});

class Pool2DGradient : public ::testing::TestWithParam<Pool2DCase> {};

TEST_P(Pool2DGradient, MaxMatchesFiniteDifferencesWithoutTies) {
  MaxPool2D layer(pool_options(GetParam()));
  std::mt19937 rng(52);
  EXPECT_GRADIENTS_MATCH(
      check_layer(layer, 2, distinct_values(batch_floats(layer.input_shape(), 2), rng), 53));
}

TEST_P(Pool2DGradient, AverageMatchesFiniteDifferences) {
  AveragePool2D layer(pool_options(GetParam()));
  std::mt19937 rng(54);
  EXPECT_GRADIENTS_MATCH(
      check_layer(layer, 2, uniform(batch_floats(layer.input_shape(), 2), -1, 1, rng), 55));
}

INSTANTIATE_TEST_SUITE_P(GradientCheck, Pool2DGradient, kPool2DCases, pool2d_case_name);

// ---------------------------------------------------------------------------------------------
// Softmax cross-entropy against log-sum-exp in double.

// Mean over rows of log Σ_c exp(x_c) - x_label, computed stably in double.
double reference_cross_entropy(const std::vector<double>& logits,
                               const std::vector<int32_t>& labels, int classes) {
  const int n = static_cast<int>(labels.size());
  double total = 0.0;
  for (int r = 0; r < n; ++r) {
    const double* row = logits.data() + static_cast<size_t>(r) * classes;
    const double max = *std::max_element(row, row + classes);
    double sum = 0.0;
    for (int c = 0; c < classes; ++c) sum += std::exp(row[c] - max);
    total += max + std::log(sum) - row[labels[r]];
  }
  return total / n;
}

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

std::vector<int32_t> random_labels(int n, int classes, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> dist(0, classes - 1);
  std::vector<int32_t> labels(n);
  for (int32_t& l : labels) l = dist(rng);
  return labels;
}

TEST(SoftmaxCrossEntropy, LossEqualsDoubleLogSumExp) {
  std::mt19937 rng(60);
  const int n = 7, classes = 10;
  const std::vector<float> logits = uniform(n * classes, -5.0f, 5.0f, rng);
  const std::vector<int32_t> labels = random_labels(n, classes, rng);
  const double expected = reference_cross_entropy(to_double(logits), labels, classes);
  EXPECT_NEAR(softmax_cross_entropy(logits.data(), labels.data(), n, classes, nullptr), expected,
              1e-6 * std::fabs(expected));
}

TEST(SoftmaxCrossEntropy, DlogitsMatchCentralDifferencesOfTheDoubleReference) {
  std::mt19937 rng(61);
  const int n = 4, classes = 5;
  const std::vector<float> logits = uniform(n * classes, -3.0f, 3.0f, rng);
  const std::vector<int32_t> labels = random_labels(n, classes, rng);
  std::vector<float> dlogits(logits.size(), kStaleGradient);
  softmax_cross_entropy(logits.data(), labels.data(), n, classes, dlogits.data());

  // In double the truncation error of a 1e-4 step is ~1e-9, far below float32 gradients' own
  // rounding (~1e-8 here), so this checks the formula tightly.
  const double h = 1e-4;
  std::vector<double> x = to_double(logits);
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double plus = reference_cross_entropy(x, labels, classes);
    x[i] = saved - h;
    const double minus = reference_cross_entropy(x, labels, classes);
    x[i] = saved;
    EXPECT_NEAR(dlogits[i], (plus - minus) / (2 * h), 1e-6) << "logit " << i;
  }
}

TEST(SoftmaxCrossEntropy, DlogitsMatchCentralDifferencesOfItsOwnLoss) {
  std::mt19937 rng(62);
  const int n = 4, classes = 5;
  std::vector<float> logits = uniform(n * classes, -3.0f, 3.0f, rng);
  const std::vector<int32_t> labels = random_labels(n, classes, rng);
  std::vector<float> dlogits(logits.size(), kStaleGradient);
  softmax_cross_entropy(logits.data(), labels.data(), n, classes, dlogits.data());

  // The loss is float32 (≈ 1e-7 relative of a loss ≈ 2), so its difference quotient over 2e-3 is
  // good to ≈ 1e-4 absolute, against gradients of magnitude up to 1/n = 0.25.
  for (size_t i = 0; i < logits.size(); ++i) {
    const float saved = logits[i];
    logits[i] = saved + kEps;
    const double plus_at = logits[i];
    const double plus = softmax_cross_entropy(logits.data(), labels.data(), n, classes, nullptr);
    logits[i] = saved - kEps;
    const double minus_at = logits[i];
    const double minus = softmax_cross_entropy(logits.data(), labels.data(), n, classes, nullptr);
    logits[i] = saved;
    EXPECT_NEAR(dlogits[i], (plus - minus) / (plus_at - minus_at), 5e-4) << "logit " << i;
  }
}

TEST(SoftmaxCrossEntropy, StaysFiniteAndExactForLogitsOfTenThousand) {
  std::mt19937 rng(63);
  const int n = 6, classes = 10;
  std::vector<float> logits = uniform(n * classes, -1e4f, 1e4f, rng);
  logits[0] = 1e4f;  // a row with both extremes, labelled on the smallest
  logits[1] = -1e4f;
  std::vector<int32_t> labels = random_labels(n, classes, rng);
  labels[0] = 1;
  std::vector<float> dlogits(logits.size(), kStaleGradient);
  const float loss =
      softmax_cross_entropy(logits.data(), labels.data(), n, classes, dlogits.data());

  const std::vector<double> x = to_double(logits);
  const double expected = reference_cross_entropy(x, labels, classes);
  ASSERT_TRUE(std::isfinite(loss));
  EXPECT_NEAR(loss, expected, 1e-6 * std::fabs(expected));
  for (int r = 0; r < n; ++r) {
    const double* row = x.data() + static_cast<size_t>(r) * classes;
    const double max = *std::max_element(row, row + classes);
    double sum = 0.0;
    for (int c = 0; c < classes; ++c) sum += std::exp(row[c] - max);
    for (int c = 0; c < classes; ++c) {
      const float g = dlogits[static_cast<size_t>(r) * classes + c];
      const double softmax = std::exp(row[c] - max) / sum;
      ASSERT_TRUE(std::isfinite(g)) << "row " << r << " class " << c;
      EXPECT_NEAR(g, (softmax - (c == labels[r] ? 1.0 : 0.0)) / n, 1e-7);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Forward against references.

TEST(Dense, ForwardEqualsNaiveLoop) {
  const int n = 3, in = 7, out = 5;
  Dense layer({.in_features = in, .out_features = out, .weight_name = "w", .bias_name = "b"});
  ParamSet params(layer.param_specs());
  layer.set_first_param(0);
  std::mt19937 rng(70);
  fill_params(params, rng);
  const std::vector<float> x = uniform(n * in, -1, 1, rng);
  std::vector<float> scratch;
  const std::vector<float> y = run_forward(layer, params, n, x, scratch);
  for (int r = 0; r < n; ++r) {
    for (int c = 0; c < out; ++c) {
      double expected = params.values(1)[c];
      for (int k = 0; k < in; ++k)
        expected += double{x[r * in + k]} * params.values(0)[c * in + k];  // w is (out, in)
      EXPECT_NEAR(y[r * out + c], expected, 1e-5) << "row " << r << " column " << c;
    }
  }
}

// One dimension as tf.nn.conv2d sizes it: SAME gives ceil(in/s) outputs and pads
// max((out-1)·s + k - in, 0) in all, the smaller half before; VALID gives floor((in-k)/s) + 1.
struct TfAxis {
  int out, pad_before;
};
TfAxis tf_axis(int in, int k, int s, Padding padding) {
  if (padding == Padding::kValid) return {(in - k) / s + 1, 0};
  const int out = (in + s - 1) / s;
  return {out, std::max((out - 1) * s + k - in, 0) / 2};
}

// Direct convolution (cross-correlation, as tf.nn.conv2d) over NHWC / (KH,KW,C_in,C_out).
std::vector<double> direct_conv(const ConvCase& c, int batch, const std::vector<float>& in,
                                std::span<const float> w, std::span<const float> b) {
  const TfAxis ry = tf_axis(c.height, c.kernel, c.stride_height, c.padding);
  const TfAxis rx = tf_axis(c.width, c.kw(), c.stride_width, c.padding);
  std::vector<double> out(static_cast<size_t>(batch) * ry.out * rx.out * c.out_channels);
  for (int n = 0; n < batch; ++n)
    for (int oh = 0; oh < ry.out; ++oh)
      for (int ow = 0; ow < rx.out; ++ow)
        for (int o = 0; o < c.out_channels; ++o) {
          double sum = b[o];
          for (int kh = 0; kh < c.kernel; ++kh)
            for (int kw = 0; kw < c.kw(); ++kw)
              for (int ci = 0; ci < c.in_channels; ++ci) {
                const int ih = oh * c.stride_height + kh - ry.pad_before;
                const int iw = ow * c.stride_width + kw - rx.pad_before;
                if (ih < 0 || ih >= c.height || iw < 0 || iw >= c.width) continue;
                sum += double{in[((n * c.height + ih) * c.width + iw) * c.in_channels + ci]} *
                       w[((kh * c.kw() + kw) * c.in_channels + ci) * c.out_channels + o];
              }
          out[((n * ry.out + oh) * rx.out + ow) * c.out_channels + o] = sum;
        }
  return out;
}

class Conv2DForward : public ::testing::TestWithParam<ConvParam> {};

TEST_P(Conv2DForward, EqualsDirectConvolutionOnRandomData) {
  const ConvCase c = with_implementation(GetParam());
  Conv2D layer = make_conv(c);
  ParamSet params(layer.param_specs());
  layer.set_first_param(0);
  std::mt19937 rng(80);
  fill_params(params, rng);
  const int batch = 3;
  const std::vector<float> x = uniform(batch_floats(layer.input_shape(), batch), -1, 1, rng);
  std::vector<float> scratch;
  const std::vector<float> y = run_forward(layer, params, batch, x, scratch);
  const std::vector<double> expected = direct_conv(c, batch, x, params.values(0), params.values(1));
  ASSERT_EQ(y.size(), expected.size());
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], expected[i], 1e-5) << "output " << i;
}

INSTANTIATE_TEST_SUITE_P(Conv2D, Conv2DForward,
                         ::testing::Combine(kConvCases, kConvImplementations), conv_case_name);
INSTANTIATE_TEST_SUITE_P(Direct, Conv2DForward,
                         ::testing::Combine(kDirectConvCases,
                                            ::testing::Values(ConvImplementation::kDirect)),
                         conv_case_name);

// One 3x3 image holding 1..9, one input and one output channel; returns the 3x3 output.
std::vector<float> conv_3x3_image(const std::vector<float>& filter, float bias) {
  Conv2D layer = make_conv({3, 3, 1, 1, 3});
  ParamSet params(layer.param_specs());
  layer.set_first_param(0);
  std::copy(filter.begin(), filter.end(), params.values(0).begin());
  params.values(1)[0] = bias;
  std::vector<float> image(9);
  std::iota(image.begin(), image.end(), 1.0f);
  std::vector<float> scratch;
  return run_forward(layer, params, 1, image, scratch);
}

TEST(Conv2D, AllOnesFilterSumsEachZeroPaddedNeighbourhood) {
  const std::vector<float> out = conv_3x3_image(std::vector<float>(9, 1.0f), 0.5f);
  // 1 2 3      12 21 16
  // 4 5 6  ->  27 45 33  (+ 0.5 bias)
  // 7 8 9      24 39 28
  const std::vector<float> expected = {12.5f, 21.5f, 16.5f, 27.5f, 45.5f,
                                       33.5f, 24.5f, 39.5f, 28.5f};
  EXPECT_EQ(out, expected);
}

TEST(Conv2D, TopLeftTapReadsTheUpperLeftNeighbour) {
  // Cross-correlation, not flipped convolution: w[kh=0][kw=0] multiplies in[oh-1][ow-1].
  std::vector<float> filter(9, 0.0f);
  filter[0] = 1.0f;
  const std::vector<float> expected = {0, 0, 0, 0, 1, 2, 0, 4, 5};
  EXPECT_EQ(conv_3x3_image(filter, 0.0f), expected);
}

TEST(Conv2D, BackwardWithoutInputGradientGivesTheSameParameterGradients) {
  const ConvCase c{5, 5, 2, 3, 3};
  Conv2D layer = make_conv(c);
  ParamSet params(layer.param_specs());
  layer.set_first_param(0);
  std::mt19937 rng(90);
  fill_params(params, rng);
  const int batch = 2;
  const std::vector<float> x = uniform(batch_floats(layer.input_shape(), batch), -1, 1, rng);
  std::vector<float> scratch;
  std::vector<float> y = run_forward(layer, params, batch, x, scratch);
  const std::vector<float> dy = uniform(y.size(), -1, 1, rng);
  const LayerIo io{batch, x.data(), y.data(), scratch.data()};

  GradSet with_din(layer.param_specs()), without_din(layer.param_specs());
  std::vector<float> din(x.size());
  layer.backward(params, with_din, io, dy.data(), din.data());
  layer.backward(params, without_din, io, dy.data(), nullptr);
  EXPECT_TRUE(
      std::equal(with_din.flat().begin(), with_din.flat().end(), without_din.flat().begin()));
}

TEST(Conv2D, RejectsAValidKernelLargerThanTheImage) {
  EXPECT_THROW(Conv2D({.height = 4,
                       .width = 8,
                       .in_channels = 1,
                       .out_channels = 1,
                       .kernel_height = 5,
                       .kernel_width = 3,
                       .padding = Padding::kValid,
                       .weight_name = "w",
                       .bias_name = "b"}),
               Error);
}

TEST(Conv2D, DeclaresTensorFlowShapedRegularisedWeightsAndConstantBias) {
  Conv2D layer({.height = 28,
                .width = 28,
                .in_channels = 1,
                .out_channels = 32,
                .weight_name = "conv1_w",
                .bias_name = "conv1_b",
                .weight_l2 = 1e-4f});
  const std::vector<ParamSpec> specs = layer.param_specs();
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[0].name, "conv1_w");
  EXPECT_EQ(specs[0].shape, (Shape{5, 5, 1, 32}));
  EXPECT_EQ(specs[0].init, InitSpec::truncated_normal(0.1f));
  EXPECT_EQ(specs[0].l2, 1e-4f);
  EXPECT_EQ(specs[0].fan_in, 5 * 5 * 1);
  EXPECT_EQ(specs[0].fan_out, 5 * 5 * 32);
  EXPECT_EQ(specs[1].name, "conv1_b");
  EXPECT_EQ(specs[1].shape, (Shape{32}));
  EXPECT_EQ(specs[1].init, InitSpec::constant(0.1f));
  EXPECT_EQ(specs[1].l2, 0.0f);
  EXPECT_EQ(layer.output_shape(), (Shape{28, 28, 32}));
}

// ---------------------------------------------------------------------------------------------
// MaxPool2D by hand.

struct PoolRun {
  std::vector<float> out;
  std::vector<float> din;
};

// Forward on one image, then backward with the given dout (or all ones when empty).
PoolRun pool_one_image(const Pool2DOptions& options, const std::vector<float>& image,
                       std::vector<float> dout = {}) {
  MaxPool2D layer(options);
  ParamSet params;
  GradSet grads;
  std::vector<float> scratch;
  PoolRun run;
  run.out = run_forward(layer, params, 1, image, scratch);
  if (dout.empty()) dout.assign(run.out.size(), 1.0f);
  run.din.assign(image.size(), kStaleGradient);
  layer.backward(params, grads, {1, image.data(), run.out.data(), scratch.data()}, dout.data(),
                 run.din.data());
  return run;
}

// build_model runs ReLU followed by max pooling as max pooling followed by ReLU (model_spec.cc).
// Both orders give the same outputs and input gradients bit for bit, here on inputs of halves in
// [-1, 1], so that windows hold ties, zeros, and nothing but negatives.
TEST(MaxPool2D, AfterReluEqualsBeforeReluForwardAndBackward) {
  const MaxPool2D pool(square_pool(7, 6, 3, 2, 2));
  const Relu relu_before(pool.input_shape()), relu_after(pool.output_shape());
  ParamSet params;
  GradSet grads;
  std::mt19937 rng(90);
  const int batch = 3;
  std::vector<float> x = uniform(batch_floats(pool.input_shape(), batch), -1, 1, rng);
  for (float& v : x) v = std::round(v * 2) / 2;
  const std::vector<float> dout = uniform(batch_floats(pool.output_shape(), batch), -1, 1, rng);
  std::vector<float> scratch_a, scratch_b, unused;
  std::vector<float> din_a(x.size()), din_b(x.size()), between_a(x.size()), between_b(dout.size());

  std::vector<float> relu_x = run_forward(relu_before, params, batch, x, unused);
  std::vector<float> y_a = run_forward(pool, params, batch, relu_x, scratch_a);
  pool.backward(params, grads, {batch, relu_x.data(), y_a.data(), scratch_a.data()}, dout.data(),
                between_a.data());
  relu_before.backward(params, grads, {batch, x.data(), relu_x.data(), nullptr}, between_a.data(),
                       din_a.data());

  std::vector<float> pooled = run_forward(pool, params, batch, x, scratch_b);
  std::vector<float> y_b = run_forward(relu_after, params, batch, pooled, unused);
  relu_after.backward(params, grads, {batch, pooled.data(), y_b.data(), nullptr}, dout.data(),
                      between_b.data());
  pool.backward(params, grads, {batch, x.data(), pooled.data(), scratch_b.data()}, between_b.data(),
                din_b.data());

  EXPECT_EQ(y_a, y_b);
  EXPECT_EQ(din_a, din_b);
  EXPECT_GT(std::count(y_a.begin(), y_a.end(), 0.0f), 0) << "no window was all negative";
}

TEST(MaxPool2D, PicksTheMaximumOfEachWindowAndRoutesItsGradientThere) {
  const std::vector<float> image = {
      1, 5, 2, 0,  //
      3, 4, 8, 1,  //
      0, 2, 6, 7,  //
      9, 1, 3, 2,  //
  };
  const PoolRun run = pool_one_image(square_pool(4, 4, 1, 2, 2), image, {10, 20, 30, 40});
  EXPECT_EQ(run.out, (std::vector<float>{5, 8, 9, 7}));
  EXPECT_EQ(run.din, (std::vector<float>{
                         0, 10, 0, 0,  //
                         0, 0, 20, 0,  //
                         0, 0, 0, 40,  //
                         30, 0, 0, 0,  //
                     }));
}

TEST(MaxPool2D, PoolsEachChannelIndependently) {
  // 2x2x2: channel 0 peaks at (1,0), channel 1 at (0,1).
  const std::vector<float> image = {0, 1, 2, 7, 5, 3, 4, 6};
  const PoolRun run = pool_one_image(square_pool(2, 2, 2, 2, 2), image, {10, 20});
  EXPECT_EQ(run.out, (std::vector<float>{5, 7}));
  EXPECT_EQ(run.din, (std::vector<float>{0, 0, 0, 20, 10, 0, 0, 0}));
}

TEST(MaxPool2D, OddSizeEdgeWindowsPoolOnlyTheInputsTheyCover) {
  // All negative, so a window that counted padding as 0 would output 0.
  const std::vector<float> image = {
      -5, -2, -9,  //
      -4, -3, -1,  //
      -8, -6, -7,  //
  };
  MaxPool2D layer(square_pool(3, 3, 1, 2, 2));
  EXPECT_EQ(layer.output_shape(), (Shape{2, 2, 1}));
  const PoolRun run = pool_one_image(square_pool(3, 3, 1, 2, 2), image, {1, 2, 3, 4});
  EXPECT_EQ(run.out, (std::vector<float>{-2, -1, -6, -7}));
  EXPECT_EQ(run.din, (std::vector<float>{
                         0, 1, 0,  //
                         0, 0, 2,  //
                         0, 3, 4,  //
                     }));
}

TEST(MaxPool2D, TiesGoToTheFirstMaximum) {
  const std::vector<float> image = {3, 3, 3, 3};
  const PoolRun run = pool_one_image(square_pool(2, 2, 1, 2, 2), image);
  EXPECT_EQ(run.out, (std::vector<float>{3}));
  EXPECT_EQ(run.din, (std::vector<float>{1, 0, 0, 0}));
}

TEST(MaxPool2D, OverlappingWindowsAddTheirGradients) {
  // 3x3 windows, stride 2, on 3x3: SAME gives 2x2 outputs whose windows all contain the centre.
  const std::vector<float> image = {0, 0.1f, 0.2f, 0.3f, 9, 0.4f, 0.5f, 0.6f, 0.7f};
  const PoolRun run = pool_one_image(square_pool(3, 3, 1, 3, 2), image, {1, 2, 3, 4});
  EXPECT_EQ(run.out, (std::vector<float>{9, 9, 9, 9}));
  EXPECT_EQ(run.din, (std::vector<float>{0, 0, 0, 0, 10, 0, 0, 0, 0}));
}

TEST(MaxPool2D, OutputIsCeilingOfHalfTheInput) {
  EXPECT_EQ(MaxPool2D(square_pool(28, 28, 32, 2, 2)).output_shape(), (Shape{14, 14, 32}));
  EXPECT_EQ(MaxPool2D(square_pool(7, 5, 3, 2, 2)).output_shape(), (Shape{4, 3, 3}));
}

// ---------------------------------------------------------------------------------------------
// AveragePool2D, Dropout and the paddings by hand.

TEST(AveragePool2D, SameEdgeWindowsAverageOnlyTheInputsTheyCover) {
  // tf.nn.avg_pool with SAME padding divides by the number of valid inputs in the window, not by
  // the window size: the 3x3 image pooled 2x2/2 has windows of 4, 2, 2 and 1 inputs.
  const std::vector<float> image = {
      1, 2, 3,  //
      4, 5, 6,  //
      7, 8, 9,  //
  };
  AveragePool2D layer(square_pool(3, 3, 1, 2, 2));
  ParamSet params;
  GradSet grads;
  std::vector<float> scratch;
  const std::vector<float> out = run_forward(layer, params, 1, image, scratch);
  EXPECT_EQ(out, (std::vector<float>{3, 4.5f, 7.5f, 9}));
  std::vector<float> din(9, kStaleGradient);
  const std::vector<float> dout = {4, 2, 6, 1};
  layer.backward(params, grads, {1, image.data(), const_cast<float*>(out.data()), scratch.data()},
                 dout.data(), din.data());
  EXPECT_EQ(din, (std::vector<float>{
                     1, 1, 1,  //
                     1, 1, 1,  //
                     3, 3, 1,  //
                 }));
}

TEST(AveragePool2D, MatchesTensorFlowsSamePoolingOfARowOfFour) {
  // tf.nn.avg_pool of [-2, -1, 0, 1] with window 3, stride 3, SAME gives [-1.5, 0.5]
  // (chainer/chainer#3391): one column of padding on each side, neither counted.
  AveragePool2D layer({.height = 1,
                       .width = 4,
                       .channels = 1,
                       .pool_height = 1,
                       .pool_width = 3,
                       .stride_height = 1,
                       .stride_width = 3});
  ParamSet params;
  std::vector<float> scratch;
  EXPECT_EQ(run_forward(layer, params, 1, {-2, -1, 0, 1}, scratch),
            (std::vector<float>{-1.5f, 0.5f}));
}

TEST(Pool2D, ValidPaddingDropsWindowsThatDoNotFit) {
  Pool2DOptions o = square_pool(7, 5, 3, 2, 2);
  o.padding = Padding::kValid;
  EXPECT_EQ(MaxPool2D(o).output_shape(), (Shape{3, 2, 3}));
  o.padding = Padding::kSame;
  EXPECT_EQ(AveragePool2D(o).output_shape(), (Shape{4, 3, 3}));
}

TEST(Conv2D, StridedSameAndValidOutputShapesFollowTensorFlow) {
  // SAME: ceil(H/S); VALID: floor((H-K)/S) + 1.
  Conv2DOptions o{.height = 28,
                  .width = 27,
                  .in_channels = 1,
                  .out_channels = 4,
                  .kernel_height = 3,
                  .kernel_width = 5,
                  .stride_height = 2,
                  .stride_width = 3,
                  .padding = Padding::kSame,
                  .weight_name = "w",
                  .bias_name = "b"};
  EXPECT_EQ(Conv2D(o).output_shape(), (Shape{14, 9, 4}));
  o.padding = Padding::kValid;
  EXPECT_EQ(Conv2D(o).output_shape(), (Shape{13, 8, 4}));
}

TEST(Dropout, EvaluationIsTheIdentity) {
  Dropout layer({100}, 0.5f);
  std::mt19937 rng(100);
  const std::vector<float> x = uniform(300, -1, 1, rng);
  std::vector<float> scratch;
  ParamSet params;
  EXPECT_EQ(run_forward(layer, params, 3, x, scratch, /*training=*/false), x);
}

TEST(Dropout, TrainingKeepsAboutOneMinusRateAndScalesTheKeptValues) {
  const float rate = 0.3f;
  Dropout layer({1000}, rate);
  const std::vector<float> x(4000, 1.0f);
  std::vector<float> scratch;
  ParamSet params;
  const std::vector<float> y = run_forward(layer, params, 4, x, scratch, /*training=*/true);
  size_t kept = 0;
  for (float v : y) {
    if (v != 0.0f) {
      ++kept;
      EXPECT_FLOAT_EQ(v, 1.0f / (1.0f - rate));
    }
  }
  // 4000 draws at p = 0.7: the standard deviation of the count is 29.
  EXPECT_NEAR(static_cast<double>(kept), 0.7 * 4000, 150);
}

TEST(Dropout, AnExampleDrawsTheSameMaskWhicheverTowerComputesIt) {
  // Rows 2 and 3 of a batch of 4, computed alone as a tower whose first example is 2.
  Dropout layer({50}, 0.5f);
  ParamSet params;
  const std::vector<float> x(200, 1.0f);
  std::vector<float> whole(200), half(100), scratch_whole(200), scratch_half(100);
  layer.forward(params, {.batch = 4,
                         .in = x.data(),
                         .out = whole.data(),
                         .scratch = scratch_whole.data(),
                         .training = true,
                         .seed = 11});
  layer.forward(params, {.batch = 2,
                         .in = x.data(),
                         .out = half.data(),
                         .scratch = scratch_half.data(),
                         .training = true,
                         .seed = 11,
                         .first_example = 2});
  EXPECT_TRUE(std::equal(half.begin(), half.end(), whole.begin() + 100));
  // And another step's seed draws another mask.
  std::vector<float> other(200);
  layer.forward(params, {.batch = 4,
                         .in = x.data(),
                         .out = other.data(),
                         .scratch = scratch_whole.data(),
                         .training = true,
                         .seed = 12});
  EXPECT_NE(other, whole);
}

}  // namespace
}  // namespace dtrain
