// Convolutions under Precision::kBf16, on oneDNN's primitives and on im2col's products: each pass
// must give what fp32 gives for the inputs rounded to bf16 here (to nearest, ties to even), and
// not what fp32 gives for the unrounded ones.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "nn/conv_kernels.h"
#include "support/bf16_rounding.h"
#include "tensor/bf16_gemm.h"
#include "tensor/blas.h"
#include "tensor/thread_team.h"

namespace dtrain {
namespace conv_bf16_test {
namespace {

std::vector<float> rounded(std::vector<float> x) {
  for (float& v : x) v = testing::bf16_rounded(v);
  return x;
}

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = value(rng);
  return x;
}

double largest_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(double(a[i]) - b[i]));
  return d;
}

struct Passes {
  std::vector<float> out, dw, db, din;
};

Passes run(const ConvKernels& conv, const ConvShape& s, int batch, const std::vector<float>& w,
           const std::vector<float>& bias, const std::vector<float>& in,
           const std::vector<float>& dout, Precision precision) {
  const PrecisionScope scope(precision);
  Passes p;
  p.out.resize(batch * s.out_image_floats());
  p.dw.resize(s.weight_floats());
  p.db.resize(s.out_channels);
  p.din.resize(batch * s.image_floats());
  conv.forward(w.data(), bias.data(), in.data(), batch, p.out.data());
  conv.backward(w.data(), in.data(), dout.data(), batch, 0.0f, p.dw.data(), p.db.data(),
                p.din.data());
  return p;
}

class ConvBf16 : public ::testing::TestWithParam<ConvImplementation> {
 protected:
  void SetUp() override {
    const std::string why_not = bf16_unsupported_reason();
    if (!why_not.empty()) GTEST_SKIP() << "no bf16 products here: " << why_not;
  }
};

TEST_P(ConvBf16, EveryPassIsFp32OfTheRoundedInputs) {
  // 32 channels in: oneDNN runs all three passes (below, im2col's backward is faster). 32 out:
  // im2col's input gradient, a product 32 deep, is deep enough for bf16 (bf16_gemm_pays).
  const ConvShape s{.height = 8,
                    .width = 8,
                    .in_channels = 32,
                    .out_channels = 32,
                    .kernel_height = 3,
                    .kernel_width = 3,
                    .pad_top = 1,
                    .pad_left = 1,
                    .out_height = 8,
                    .out_width = 8};
  const int batch = 6;
  const std::unique_ptr<ConvKernels> conv = make_conv_kernels(s, GetParam(), "conv");
  const std::vector<float> w = random_floats(s.weight_floats(), 1);
  const std::vector<float> bias = random_floats(s.out_channels, 2);
  const std::vector<float> in = random_floats(batch * s.image_floats(), 3);
  const std::vector<float> dout = random_floats(batch * s.out_image_floats(), 4);
  ThreadTeam team(2);  // the batch split over a team, as training runs it
  ScopedTeam on_team(&team);
  const Passes bf16 = run(*conv, s, batch, w, bias, in, dout, Precision::kBf16);
  const Passes reference =
      run(*conv, s, batch, rounded(w), bias, rounded(in), rounded(dout), Precision::kFp32);
  const Passes fp32 = run(*conv, s, batch, w, bias, in, dout, Precision::kFp32);
  const auto check = [](const char* pass, const std::vector<float>& got,
                        const std::vector<float>& want, const std::vector<float>& unrounded) {
    const double error = largest_difference(got, want);
    // Sums of up to 6·64·9 terms of |x| < 1 in fp32 against bf16's rounding of each term.
    EXPECT_LT(error, 1e-3) << pass;
    EXPECT_GT(largest_difference(unrounded, want), 10 * error) << pass << ": fp32's answer";
  };
  check("forward", bf16.out, reference.out, fp32.out);
  check("weight gradient", bf16.dw, reference.dw, fp32.dw);
  check("input gradient", bf16.din, reference.din, fp32.din);
  // oneDNN sums the bias gradient from the bf16 output gradient it reads; im2col from the fp32.
  if (GetParam() == ConvImplementation::kOneDnn) {
    check("bias gradient", bf16.db, reference.db, fp32.db);
  } else {
    EXPECT_LT(largest_difference(bf16.db, fp32.db), 1e-4) << "bias gradient";
  }
}

INSTANTIATE_TEST_SUITE_P(Implementations, ConvBf16,
                         ::testing::Values(ConvImplementation::kOneDnn,
                                           ConvImplementation::kIm2col),
                         [](const auto& info) {
                           return std::string(conv_implementation_name(info.param));
                         });

}  // namespace
}  // namespace conv_bf16_test
}  // namespace dtrain
