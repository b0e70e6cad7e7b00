// Finite-difference gradient checks for every layer and the loss (support/layer_check.h's harness,
// which the first tests here prove rejects a wrong backward); each layer's forward is pinned to
// references in layer_forward_test.cc.
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
#include "support/layer_check.h"
#include "tensor/thread_team.h"

namespace dtrain {
namespace {

using namespace layer_check;  // NOLINT(google-build-using-namespace): this file is its own unit

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

}  // namespace
}  // namespace dtrain
