// What the layer tests share: finite-difference gradient checks of L = Σ out ⊙ R for a fixed
// random R (backward with dout = R must give dL/dparams and dL/din), random inputs kept away from
// kinks and ties, and the Conv2D cases every implementation runs. Included by test files that are
// compiled on their own (tests/CMakeLists.txt: not in a unity batch).
#pragma once

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

namespace dtrain::layer_check {

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

inline std::vector<float> uniform(size_t n, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Values of magnitude in [0.1, 1) with random signs: none within eps of ReLU's kink at 0.
inline std::vector<float> away_from_zero(size_t n, std::mt19937& rng) {
  std::vector<float> v = uniform(n, 0.1f, 1.0f, rng);
  std::bernoulli_distribution negative(0.5);
  for (float& x : v) x = negative(rng) ? -x : x;
  return v;
}

// A shuffled ladder 0.01 apart: no ties, and no eps-perturbation can change which input is largest.
inline std::vector<float> distinct_values(size_t n, std::mt19937& rng) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 0.01f * static_cast<float>(i) - 0.005f * n;
  std::shuffle(v.begin(), v.end(), rng);
  return v;
}

inline void fill_params(ParamSet& params, std::mt19937& rng) {
  for (size_t i = 0; i < params.count(); ++i) {
    std::vector<float> v = uniform(params.values(i).size(), -1.0f, 1.0f, rng);
    std::copy(v.begin(), v.end(), params.values(i).begin());
  }
}

inline size_t batch_floats(const Shape& shape, int batch) {
  return static_cast<size_t>(batch) * static_cast<size_t>(num_elements(shape));
}

// The step seed of training passes in these checks: every forward of a check draws the same
// dropout mask, so the loss is a fixed function of the parameters and inputs.
constexpr uint64_t kStepSeed = 7;

// Runs forward on its own output and scratch buffers, exactly sized so ASan catches overruns.
inline std::vector<float> run_forward(const Layer& layer, const ParamSet& params, int batch,
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
inline GradCheckResult check_gradients(const Layer& layer, int batch, std::vector<float> in,
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
inline GradCheckResult check_layer(Layer& layer, int batch, const std::vector<float>& in,
                                   uint32_t seed, bool training = false) {
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

struct ConvCase {
  int height, width, in_channels, out_channels, kernel;
  int kernel_width = 0;  // 0: square, = kernel
  int stride_height = 1;
  int stride_width = 1;
  Padding padding = Padding::kSame;
  ConvImplementation implementation = ConvImplementation::kAuto;

  int kw() const { return kernel_width > 0 ? kernel_width : kernel; }
};

inline Conv2D make_conv(const ConvCase& c) {
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
inline ConvCase with_implementation(const ConvParam& param) {
  ConvCase c = std::get<0>(param);
  c.implementation = std::get<1>(param);
  return c;
}

inline std::string conv_case_name(const ::testing::TestParamInfo<ConvParam>& info) {
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
inline const auto kConvCases = ::testing::Values(
    ConvCase{5, 5, 2, 3, 3}, ConvCase{5, 5, 2, 3, 5}, ConvCase{6, 5, 2, 3, 4},
    ConvCase{4, 7, 3, 2, 3}, ConvCase{3, 4, 2, 2, 1}, ConvCase{7, 6, 2, 3, 3, 3, 2, 2},
    ConvCase{6, 7, 2, 2, 2, 3, 2, 3}, ConvCase{5, 7, 2, 3, 3, 2, 1, 2},
    ConvCase{7, 6, 2, 3, 3, 2, 2, 3, Padding::kValid},
    ConvCase{6, 6, 1, 2, 2, 2, 2, 2, Padding::kValid},
    ConvCase{4, 5, 2, 2, 4, 5, 1, 1, Padding::kValid},
    // Eight input channels and more, where auto takes oneDNN's vectorised kernels.
    ConvCase{5, 5, 8, 3, 3}, ConvCase{6, 5, 16, 4, 4, 4, 2, 2});
// auto too: from 8 to 31 input channels it runs oneDNN's forward with im2col's backward.
inline const auto kConvImplementations = ::testing::Values(
    ConvImplementation::kIm2col, ConvImplementation::kOneDnn, ConvImplementation::kAuto);

// The direct kernels take output channels 16 at a time, 32 where they can: 16, 32 and 48 (a pair
// and a single block). Rows of outputs go in strips, here with a last partial strip (29 columns),
// and kernel rows of 15 taps (3 channels × 5) in groups with a partial last one; strides and
// VALID padding as above.
inline const auto kDirectConvCases =
    ::testing::Values(ConvCase{5, 5, 1, 16, 3}, ConvCase{6, 5, 2, 48, 4}, ConvCase{3, 29, 1, 16, 3},
                      ConvCase{6, 6, 3, 32, 5}, ConvCase{7, 6, 3, 16, 3, 3, 2, 2},
                      ConvCase{7, 6, 2, 32, 3, 2, 2, 3, Padding::kValid},
                      ConvCase{4, 5, 1, 16, 4, 5, 1, 1, Padding::kValid});

// A square window and stride with SAME padding, the tutorial's pooling.
inline Pool2DOptions square_pool(int height, int width, int channels, int window, int stride) {
  return {.height = height,
          .width = width,
          .channels = channels,
          .pool_height = window,
          .pool_width = window,
          .stride_height = stride,
          .stride_width = stride};
}

}  // namespace dtrain::layer_check
