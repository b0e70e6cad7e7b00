// gemm() under Precision::kBf16 against a double-precision product of the inputs rounded to bf16
// here (to nearest, ties to even), for every layout, alpha and beta, whole and split over a team;
// the answer must be that product's, not fp32's. And --precision bf16 refused, naming what is
// missing, where oneDNN is held below AVX512-BF16.
#include "tensor/bf16_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "support/bf16_rounding.h"
#include "support/process.h"
#include "tensor/blas.h"
#include "tensor/thread_team.h"

namespace dtrain {
namespace bf16_gemm_test {
namespace {

float at(const std::vector<float>& x, int ld, int row, int col) {
  return x[static_cast<size_t>(row) * ld + col];
}

// Largest |answer - product of the rounded inputs| over C, |answer - fp32 product|, and
// |rounded product - fp32 product|: the last is what a product in the other precision would be
// off by.
struct Errors {
  double bf16 = 0;
  double fp32 = 0;
  double fp32_off_by = 0;
};

struct Dims {
  int m = 37, n = 53, k = 129;
};

Errors check_layout(Trans ta, Trans tb, float alpha, float beta, Split split, Dims d = {}) {
  const int m = d.m, n = d.n, k = d.k, pad = 3;
  const int a_rows = ta == Trans::kNo ? m : k, a_cols = ta == Trans::kNo ? k : m;
  const int b_rows = tb == Trans::kNo ? k : n, b_cols = tb == Trans::kNo ? n : k;
  const int lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> a(static_cast<size_t>(a_rows) * lda), b(static_cast<size_t>(b_rows) * ldb);
  std::vector<float> c(static_cast<size_t>(m) * ldc);
  for (float& x : a) x = value(rng);
  for (float& x : b) x = value(rng);
  for (float& x : c) x = value(rng);
  const std::vector<float> c0 = c;
  {
    const PrecisionScope bf16(Precision::kBf16);
    gemm(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc, split);
  }
  Errors e;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double rounded = 0, exact = 0;
      for (int p = 0; p < k; ++p) {
        const float x = ta == Trans::kNo ? at(a, lda, i, p) : at(a, lda, p, i);
        const float y = tb == Trans::kNo ? at(b, ldb, p, j) : at(b, ldb, j, p);
        rounded += testing::bf16_rounded(x) * testing::bf16_rounded(y);
        exact += static_cast<double>(x) * y;
      }
      const double kept = beta == 0.0f ? 0.0 : beta * at(c0, ldc, i, j);
      const double expected = alpha * rounded + kept;
      e.bf16 = std::max(e.bf16, std::abs(at(c, ldc, i, j) - expected));
      e.fp32 = std::max(e.fp32, std::abs(at(c, ldc, i, j) - (alpha * exact + kept)));
      e.fp32_off_by = std::max(e.fp32_off_by, std::abs(alpha * exact + kept - expected));
    }
    for (int j = n; j < ldc; ++j) EXPECT_EQ(at(c, ldc, i, j), at(c0, ldc, i, j)) << "padding";
  }
  return e;
}

class Bf16Gemm : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why_not = bf16_unsupported_reason();
    if (!why_not.empty()) GTEST_SKIP() << "no bf16 products here: " << why_not;
  }
};

TEST_F(Bf16Gemm, EveryLayoutIsTheProductOfTheRoundedInputsSummedInFp32) {
  // beta 0 (C not read), 1 (accumulate), and any other with a step's alpha (-lr).
  for (const auto& [alpha, beta] : {std::pair{1.0f, 0.0f}, {1.0f, 1.0f}, {-0.05f, 0.99f}}) {
    for (const Trans ta : {Trans::kNo, Trans::kYes}) {
      for (const Trans tb : {Trans::kNo, Trans::kYes}) {
        SCOPED_TRACE(::testing::Message()
                     << "ta " << (ta == Trans::kYes) << " tb " << (tb == Trans::kYes) << " alpha "
                     << alpha << " beta " << beta);
        const Errors e = check_layout(ta, tb, alpha, beta, Split::kNone);
        // fp32 sums of 129 terms of |x| < 1 are off by ~1e-6; bf16's rounding moves the answer
        // by ~1e-2, so a product that ignored the precision fails the first bound.
        EXPECT_LT(e.bf16, 2e-5 * std::abs(alpha));
        EXPECT_GT(e.fp32_off_by, 100 * e.bf16 + 1e-4 * std::abs(alpha));
      }
    }
  }
}

TEST_F(Bf16Gemm, ATeamsPartsRunInTheCallersPrecision) {
  ThreadTeam team(3);
  ScopedTeam on_team(&team);
  for (const Split split : {Split::kRows, Split::kColumns}) {
    const Errors e = check_layout(Trans::kNo, Trans::kYes, 1.0f, 1.0f, split);
    EXPECT_LT(e.bf16, 2e-5);
    EXPECT_GT(e.fp32_off_by, 1e-3);
  }
}

TEST_F(Bf16Gemm, ProductsBf16WouldSlowDownAreComputedInFp32) {
  // Shallower than an AMX tile and fewer rows than one; and, for contrast, products of the same
  // depth and rows as a tile, a narrow and a wide one (a wide layer's weight gradient), which bf16
  // computes.
  struct Case {
    Dims d;
    bool in_bf16;
  };
  const Case cases[] = {{{37, 53, 10}, false},      // shallow
                        {{10, 53, 129}, false},     // few rows
                        {{16, 60, 32}, true},       // narrow
                        {{1030, 1020, 40}, true}};  // wide
  for (const auto& [d, in_bf16] : cases) {
    SCOPED_TRACE(::testing::Message() << d.m << "x" << d.n << "x" << d.k);
    EXPECT_EQ(bf16_gemm_pays(d.m, d.n, d.k), in_bf16);
    ThreadTeam team(2);
    ScopedTeam on_team(&team);
    const Errors e = check_layout(Trans::kYes, Trans::kNo, 1.0f, 0.0f, Split::kAuto, d);
    // Within rounding of the precision it should run in, and far from the other's answer.
    const double error = in_bf16 ? e.bf16 : e.fp32;
    EXPECT_LT(error, 2e-5);
    EXPECT_GT(e.fp32_off_by, 100 * error + 1e-4);
  }
}

TEST(Precision, AScopeSetsThisThreadsPrecisionAndPutsItBack) {
  EXPECT_EQ(thread_precision(), Precision::kFp32) << "the default";
  {
    const PrecisionScope outer(Precision::kBf16);
    EXPECT_EQ(thread_precision(), Precision::kBf16);
    {
      const PrecisionScope inner(Precision::kFp32);
      EXPECT_EQ(thread_precision(), Precision::kFp32);
    }
    EXPECT_EQ(thread_precision(), Precision::kBf16);
  }
  EXPECT_EQ(thread_precision(), Precision::kFp32);
  EXPECT_EQ(parse_precision("bf16"), Precision::kBf16);
  EXPECT_EQ(parse_precision("fp32"), Precision::kFp32);
  EXPECT_THROW(parse_precision("fp16"), std::invalid_argument);
}

TEST(Precision, Bf16IsRefusedNamingWhatTheKernelsLack) {
  // ONEDNN_MAX_CPU_ISA holds oneDNN to AVX2 on any CPU, as a CPU without AVX512-BF16 would be.
  const testing::ProcessResult r = testing::run_dtrain(
      {"train", "--precision", "bf16", "--train_steps", "1"}, {"ONEDNN_MAX_CPU_ISA=AVX2"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("--precision bf16: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("AVX512-BF16"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("avx2"), std::string::npos) << "oneDNN's kernels named: " << r.err;
}

}  // namespace
}  // namespace bf16_gemm_test
}  // namespace dtrain
