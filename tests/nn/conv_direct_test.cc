// The direct convolution's kernels for every instruction set this CPU runs (AVX-512, AVX2 and
// SSE2 on an AVX-512 machine), against im2col + OpenBLAS on the same operands. Conv2D's own tests
// (gradient_check_test.cc) check the widest against finite differences and a direct sum.
#include "nn/conv_direct.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "nn/conv2d.h"
#include "nn/conv_im2col.h"
#include "tensor/thread_team.h"

namespace dtrain {
namespace {

ConvShape conv_shape(int height, int width, int in_channels, int out_channels, int kernel,
                     int stride, Padding padding) {
  const AxisGeometry rows = axis_geometry(height, kernel, stride, padding);
  const AxisGeometry cols = axis_geometry(width, kernel, stride, padding);
  return {.height = height,
          .width = width,
          .in_channels = in_channels,
          .out_channels = out_channels,
          .kernel_height = kernel,
          .kernel_width = kernel,
          .stride_height = stride,
          .stride_width = stride,
          .pad_top = rows.pad_before,
          .pad_left = cols.pad_before,
          .out_height = rows.out,
          .out_width = cols.out};
}

std::vector<float> uniform(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, double tolerance,
                  const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tolerance * std::max(1.0f, std::fabs(want[i])))
        << what << "[" << i << "]";
  }
}

struct Operands {
  std::vector<float> w, bias, in, dout;
};

Operands random_operands(const ConvShape& s, int batch, uint32_t seed) {
  std::mt19937 rng(seed);
  return {uniform(s.weight_floats(), rng), uniform(static_cast<size_t>(s.out_channels), rng),
          uniform(s.image_floats() * batch, rng), uniform(s.out_image_floats() * batch, rng)};
}

// lenet's first layer, a 3-channel first layer with both channel blocks (48 = 32 + 16), a strided
// one with a partial last strip, and VALID padding whose stride leaves input rows unread.
const ConvShape kShapes[] = {conv_shape(28, 28, 1, 32, 5, 1, Padding::kSame),
                             conv_shape(9, 11, 3, 48, 3, 1, Padding::kSame),
                             conv_shape(13, 29, 2, 16, 4, 2, Padding::kSame),
                             conv_shape(8, 9, 4, 32, 3, 2, Padding::kValid)};

TEST(DirectConv, EveryInstructionSetHereAgreesWithIm2col) {
  ThreadTeam team(2);
  ScopedTeam scope(&team);
  const int batch = 3;
  for (const DirectConvIsa* isa : direct_conv_isas_here()) {
    for (const ConvShape& s : kShapes) {
      SCOPED_TRACE(fmt::format("{}: {}x{}x{} -> {}, k{} s{}", isa->name, s.height, s.width,
                               s.in_channels, s.out_channels, s.kernel_height, s.stride_height));
      const Operands x = random_operands(s, batch, 7);
      const DirectConv direct(s, *isa);
      const Im2colConv im2col(s);
      std::vector<float> out(s.out_image_floats() * batch), want_out(out.size());
      direct.forward(x.w.data(), x.bias.data(), x.in.data(), batch, out.data());
      im2col.forward(x.w.data(), x.bias.data(), x.in.data(), batch, want_out.data());
      expect_close(out, want_out, 1e-5, "out");

      // beta = 1 adds to what dw held, as the L2 term's start does.
      std::vector<float> dw(s.weight_floats(), 0.5f), want_dw = dw;
      std::vector<float> db(static_cast<size_t>(s.out_channels)), want_db(db.size());
      std::vector<float> din(s.image_floats() * batch, 9.0f), want_din(din.size());
      direct.backward(x.w.data(), x.in.data(), x.dout.data(), batch, 1.0f, dw.data(), db.data(),
                      din.data());
      im2col.backward(x.w.data(), x.in.data(), x.dout.data(), batch, 1.0f, want_dw.data(),
                      want_db.data(), want_din.data());
      expect_close(dw, want_dw, 1e-4, "dw");
      expect_close(db, want_db, 1e-4, "db");
      expect_close(din, want_din, 1e-5, "din");
    }
  }
}

TEST(DirectConv, WidestInstructionSetComesFirstAndTheBaselineIsAlwaysThere) {
  const auto isas = direct_conv_isas_here();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.back(), &direct_conv_baseline());
  if (__builtin_cpu_supports("avx512f")) {
    EXPECT_EQ(isas.front(), &direct_conv_avx512());
  }
  const DirectConv conv(kShapes[0], *isas.front());
  EXPECT_EQ(conv.name(), fmt::format("direct {}", isas.front()->name));
}

}  // namespace
}  // namespace dtrain
