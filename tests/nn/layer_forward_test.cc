// Each layer's forward pinned to a naive loop (Dense, Conv2D) or to hand-computed values (Conv2D,
// MaxPool2D, AveragePool2D, Dropout); their gradients are checked in gradient_check_test.cc.
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
