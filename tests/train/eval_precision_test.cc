// `dtrain eval --precision bf16`: the evaluation's products run in bf16 (every one of them, seen
// by gemm()'s observer in this process), the accuracy agrees with fp32's, the line says so, and a
// precision the CPU cannot run or that does not exist is refused by its flag.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <sstream>

#include "support/process.h"
#include "support/temp_dir.h"
#include "support/text_match.h"
#include "tensor/bf16_gemm.h"
#include "tensor/blas.h"
#include "train/evaluate.h"

namespace dtrain::testing {
namespace {

using ::testing::HasSubstr;

std::atomic<int> fp32_products{0};
std::atomic<int> bf16_products{0};

void count_product(const GemmCall&) {
  (thread_precision() == Precision::kBf16 ? bf16_products : fp32_products).fetch_add(1);
}

// The accuracy evaluate_checkpoint prints, and the products it ran in each precision.
struct Evaluation {
  std::string out;
  int fp32 = 0;
  int bf16 = 0;
};

Evaluation evaluate_in(const std::filesystem::path& dir, Precision precision) {
  EvalConfig config;
  config.checkpoint = dir;
  config.precision = precision;
  fp32_products = 0;
  bf16_products = 0;
  std::ostringstream out;
  set_gemm_observer(&count_product);
  evaluate_checkpoint(config, out);
  set_gemm_observer(nullptr);
  return {out.str(), fp32_products.load(), bf16_products.load()};
}

TEST(EvalPrecision, Bf16EvaluatesEveryProductInBf16AndAgreesWithFp32) {
  if (const std::string why = bf16_unsupported_reason(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const ProcessResult trained =
      run_dtrain({"train", "--model", "mlp", "--hidden_units", "64", "--train_steps", "300",
                  "--log_every", "0", "--threads", "1", "--train_dir", dir.path().string()});
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  const Evaluation fp32 = evaluate_in(dir.path(), Precision::kFp32);
  const Evaluation bf16 = evaluate_in(dir.path(), Precision::kBf16);
  EXPECT_GT(fp32.fp32, 0);
  EXPECT_EQ(fp32.bf16, 0);
  EXPECT_GT(bf16.bf16, 0);
  EXPECT_EQ(bf16.fp32, 0) << "every product of a bf16 evaluation runs in bf16";
  EXPECT_THAT(bf16.out, HasSubstr("(bf16 products, fp32 sums)"));
  EXPECT_NEAR(test_accuracy_in(bf16.out), test_accuracy_in(fp32.out), 0.005)
      << fp32.out << bf16.out;
}

TEST(EvalPrecision, APrecisionTheCpuCannotRunOrThatDoesNotExistIsRefusedByItsFlag) {
  const ProcessResult capped = run_dtrain(
      {"eval", "--checkpoint", "/nonexistent", "--precision", "bf16"}, {"ONEDNN_MAX_CPU_ISA=AVX2"});
  EXPECT_EQ(capped.exit_code, 2) << capped.err;
  EXPECT_THAT(capped.err, HasSubstr("--precision bf16: "));
  EXPECT_THAT(capped.err, HasSubstr("use fp32"));
  const ProcessResult bogus =
      run_dtrain({"eval", "--checkpoint", "/nonexistent", "--precision", "fp16"});
  EXPECT_EQ(bogus.exit_code, 2) << bogus.err;
  EXPECT_THAT(bogus.err, HasSubstr("--precision fp16: 'fp16' is not a precision: fp32 | bf16"));
}

}  // namespace
}  // namespace dtrain::testing
