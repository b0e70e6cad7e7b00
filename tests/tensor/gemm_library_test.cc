// gemm() on oneDNN against a plain double-precision product, for every layout, with padded
// leading dimensions, alpha and beta, whole and split over a team; and on OpenBLAS the same; and
// `dtrain bench gemm` listing the products of mnist_inference's step.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "support/process.h"
#include "tensor/bf16_gemm.h"
#include "tensor/blas.h"
#include "tensor/thread_team.h"

namespace dtrain {
namespace {

// Restores the process-wide library after a test.
class GemmLibraryTest : public ::testing::TestWithParam<GemmLibrary> {
 protected:
  void SetUp() override { set_gemm_library(GetParam()); }
  void TearDown() override { set_gemm_library(before_); }

 private:
  GemmLibrary before_ = gemm_library();
};

float at(const std::vector<float>& x, int ld, int row, int col) {
  return x[static_cast<size_t>(row) * ld + col];
}

void check_layout(Trans ta, Trans tb, Split split) {
  const int m = 37, n = 53, k = 29, pad = 3;
  const int a_rows = ta == Trans::kNo ? m : k, a_cols = ta == Trans::kNo ? k : m;
  const int b_rows = tb == Trans::kNo ? k : n, b_cols = tb == Trans::kNo ? n : k;
  const int lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> a(static_cast<size_t>(a_rows) * lda), b(static_cast<size_t>(b_rows) * ldb);
  std::vector<float> c(static_cast<size_t>(m) * ldc);
  for (float& x : a) x = value(rng);
  for (float& x : b) x = value(rng);
  for (float& x : c) x = value(rng);
  const std::vector<float> c0 = c;
  const float alpha = 0.5f, beta = -2.0f;
  gemm(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc, split);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double sum = 0;
      for (int p = 0; p < k; ++p) {
        const double x = ta == Trans::kNo ? at(a, lda, i, p) : at(a, lda, p, i);
        const double y = tb == Trans::kNo ? at(b, ldb, p, j) : at(b, ldb, j, p);
        sum += x * y;
      }
      const double expected = alpha * sum + beta * at(c0, ldc, i, j);
      ASSERT_NEAR(at(c, ldc, i, j), expected, 1e-4) << i << "," << j;
    }
    for (int j = n; j < ldc; ++j) ASSERT_EQ(at(c, ldc, i, j), at(c0, ldc, i, j)) << "padding";
  }
}

TEST_P(GemmLibraryTest, EveryLayoutMatchesAPlainProduct) {
  for (const Trans ta : {Trans::kNo, Trans::kYes}) {
    for (const Trans tb : {Trans::kNo, Trans::kYes}) {
      SCOPED_TRACE(::testing::Message()
                   << "ta " << (ta == Trans::kYes) << " tb " << (tb == Trans::kYes));
      check_layout(ta, tb, Split::kAuto);
    }
  }
}

TEST_P(GemmLibraryTest, SplitOverATeamMatchesAPlainProduct) {
  ThreadTeam team(3);
  ScopedTeam on_team(&team);
  for (const Split split : {Split::kRows, Split::kColumns}) {
    check_layout(Trans::kNo, Trans::kYes, split);
    check_layout(Trans::kYes, Trans::kNo, split);
  }
}

INSTANTIATE_TEST_SUITE_P(Libraries, GemmLibraryTest,
                         ::testing::Values(GemmLibrary::kOneDnn, GemmLibrary::kOpenBlas),
                         [](const auto& info) { return gemm_library_name(info.param); });

TEST(GemmLibrary, NamesParseBack) {
  EXPECT_EQ(parse_gemm_library("onednn"), GemmLibrary::kOneDnn);
  EXPECT_EQ(parse_gemm_library("openblas"), GemmLibrary::kOpenBlas);
  EXPECT_THROW(parse_gemm_library("mkl"), std::invalid_argument);
  EXPECT_EQ(gemm_library(), GemmLibrary::kOneDnn) << "the default";
}

TEST(GemmLibrary, LeavesTheCallersOpenMpThreadsAsTheyWere) {
  // A program's own thread (Python's main thread) may run other OpenMP work after dtrain's.
  const int before = omp_get_max_threads();
  omp_set_num_threads(3);
  std::vector<float> a(64, 1.0f), b(64, 1.0f), c(64, 0.0f);
  set_gemm_library(GemmLibrary::kOneDnn);
  gemm(Trans::kNo, Trans::kNo, 8, 8, 8, 1.0f, a.data(), 8, b.data(), 8, 0.0f, c.data(), 8);
  EXPECT_EQ(omp_get_max_threads(), 3);
  EXPECT_EQ(c[0], 8.0f);
  omp_set_num_threads(before);
}

TEST(GemmBench, AnUnknownLibraryIsRefusedByItsFlag) {
  const testing::ProcessResult r = testing::run_dtrain({"bench", "train", "--gemm", "mkl"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("--gemm mkl: 'mkl' is not a GEMM library: openblas | onednn"),
            std::string::npos)
      << r.err;
}

TEST(GemmBench, ListsTheProductsOfTheStepAndTheCeilingAboveEitherLibrary) {
  const testing::ProcessResult r =
      testing::run_dtrain({"bench", "gemm", "--model", "mnist_inference", "--threads", "1",
                           "--secs", "0.01", "--reps", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // 784-500-10 at batch 100: each layer's forward (x·wᵀ) and weight gradient (doutᵀ·x), and the
  // second layer's input gradient (dout·w).
  for (const char* product :
       {"100x500x784 NT", "500x784x100 TN", "100x10x500 NT", "10x500x100 TN", "100x500x10 NN"}) {
    EXPECT_NE(r.out.find(product), std::string::npos) << product << " in\n" << r.out;
  }
  EXPECT_NE(r.out.find("the 5 products of a step"), std::string::npos) << r.out;
  std::smatch m;
  const std::regex ceiling(
      R"(ceiling: ([0-9.]+) examples/sec.*OpenBLAS alone ([0-9.]+), oneDNN alone ([0-9.]+))");
  ASSERT_TRUE(std::regex_search(r.out, m, ceiling)) << r.out;
  const double best = std::stod(m[1]), openblas = std::stod(m[2]), onednn = std::stod(m[3]);
  EXPECT_GT(openblas, 0);
  EXPECT_GT(onednn, 0);
  EXPECT_GE(best * 1.0001, std::max(openblas, onednn)) << "each product on the faster of the two";
}

// A model with convolutions: each Conv2D timed on its fastest kernels, in the ceiling with the
// products; a model without has no convolution section.
TEST(GemmBench, TimesEachConvolutionOnItsFastestKernelsAndCountsItInTheCeiling) {
  const testing::ProcessResult r =
      testing::run_dtrain({"bench", "gemm", "--model", "lenet", "--threads", "1", "--secs", "0.01",
                           "--reps", "1", "--batch_size", "8"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("convolution, forward and backward"), std::string::npos) << r.out;
  // lenet's two: one input channel (dtrain's direct kernels run it), then 32 (oneDNN's). The
  // fastest kernels are named ("onednn", "onednn / im2col"), whichever they were this run.
  std::smatch m;
  const std::regex conv1(R"(conv1_w 28x28x1->28x28x32 k5x5 +([0-9.]+) \(([a-z0-9 /]+)\))");
  ASSERT_TRUE(std::regex_search(r.out, m, conv1)) << r.out;
  EXPECT_GT(std::stod(m[1]), 0) << r.out;
  const std::regex conv2(R"(conv2_w 14x14x32->14x14x64 k5x5 +([0-9.]+) \(([a-z0-9 /]+)\))");
  ASSERT_TRUE(std::regex_search(r.out, m, conv2)) << r.out;
  const double conv2_ms = std::stod(m[1]);
  ASSERT_TRUE(std::regex_search(
      r.out, m, std::regex(R"(each convolution on its fastest kernels \(([0-9.]+) ms a step\))")))
      << r.out;
  EXPECT_GT(std::stod(m[1]), conv2_ms) << "the step holds the convolutions and the products";
  const testing::ProcessResult dense = testing::run_dtrain(
      {"bench", "gemm", "--model", "softmax", "--threads", "1", "--secs", "0.01", "--reps", "1"});
  ASSERT_EQ(dense.exit_code, 0) << dense.out << dense.err;
  EXPECT_EQ(dense.out.find("convolution"), std::string::npos) << dense.out;
}

// Where the CPU has bf16 kernels, each product is timed in bf16 too, with a ceiling of its own;
// where oneDNN is held below them, the run says why it left bf16 out.
TEST(GemmBench, TimesEachProductInBf16WhereTheCpuHasItAndSaysWhyNotWhereNot) {
  const std::vector<std::string> args = {"bench",  "gemm", "--model", "mnist_inference",
                                         "--secs", "0.01", "--reps",  "1"};
  const testing::ProcessResult capped = testing::run_dtrain(args, {"ONEDNN_MAX_CPU_ISA=AVX2"});
  ASSERT_EQ(capped.exit_code, 0) << capped.out << capped.err;
  EXPECT_NE(capped.out.find("bf16 not measured: "), std::string::npos) << capped.out;
  EXPECT_EQ(capped.out.find("bf16 ceiling"), std::string::npos) << capped.out;
  if (!bf16_unsupported_reason().empty()) GTEST_SKIP() << bf16_unsupported_reason();
  const testing::ProcessResult r = testing::run_dtrain(args);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("bf16 GFLOP/s"), std::string::npos) << r.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(bf16 ceiling: ([0-9.]+) examples/sec)")))
      << r.out;
  EXPECT_GT(std::stod(m[1]), 0) << r.out;
}

}  // namespace
}  // namespace dtrain
