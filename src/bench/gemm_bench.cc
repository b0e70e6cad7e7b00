#include "bench/gemm_bench.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <mutex>
#include <random>
#include <vector>

#include "base/error.h"
#include "bench/conv_bench.h"
#include "bench/window_timing.h"
#include "nn/init.h"
#include "nn/model_zoo.h"
#include "plan/recipes.h"
#include "tensor/aligned.h"
#include "tensor/bf16_gemm.h"
#include "tensor/blas.h"
#include "tensor/blas_kernels.h"
#include "tensor/thread_team.h"
#include "train/gradient_computer.h"

namespace dtrain::bench {
namespace {

std::mutex recorded_mutex;
std::vector<GemmCall> recorded;

void record(const GemmCall& call) {
  std::lock_guard lock(recorded_mutex);
  recorded.push_back(call);
}

bool same(const GemmCall& a, const GemmCall& b) {
  return a.trans_a == b.trans_a && a.trans_b == b.trans_b && a.m == b.m && a.n == b.n &&
         a.k == b.k && a.lda == b.lda && a.ldb == b.ldb && a.ldc == b.ldc &&
         a.accumulate == b.accumulate && a.split == b.split;
}

// The products of one step of training (forward, backward, update), in the order they ran, each
// with how many times it ran.
struct Product {
  GemmCall call;
  int times = 0;
};

std::vector<Product> step_products(const Model& model, const GemmBenchConfig& config) {
  ParamSet params(model.param_specs());
  GradSet grads(model.param_specs());
  initialize_params(params, 1);
  GradientComputer computer(model, 1, config.batch_size, config.threads);
  std::vector<float> images(static_cast<size_t>(config.batch_size) * model.input_size(), 0.5f);
  std::vector<int32_t> labels(config.batch_size, 0);
  const Batch batch{images.data(), labels.data(), config.batch_size};
  {
    std::lock_guard lock(recorded_mutex);
    recorded.clear();
  }
  set_gemm_observer(&record);
  computer.compute(params, batch, grads, nullptr, nullptr);
  set_gemm_observer(nullptr);
  std::vector<Product> products;
  std::lock_guard lock(recorded_mutex);
  for (const GemmCall& call : recorded) {
    auto found = std::find_if(products.begin(), products.end(),
                              [&](const Product& p) { return same(p.call, call); });
    if (found == products.end()) {
      products.push_back({call, 1});
    } else {
      ++found->times;
    }
  }
  return products;
}

// Operands of a product, filled with small values so that no result overflows.
struct Operands {
  explicit Operands(const GemmCall& call) {
    const int a_rows = call.trans_a == Trans::kNo ? call.m : call.k;
    const int b_rows = call.trans_b == Trans::kNo ? call.k : call.n;
    a.resize(static_cast<size_t>(a_rows) * call.lda);
    b.resize(static_cast<size_t>(b_rows) * call.ldb);
    c.resize(static_cast<size_t>(call.m) * call.ldc);
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> value(-0.01f, 0.01f);
    for (float& x : a) x = value(rng);
    for (float& x : b) x = value(rng);
  }
  // Cache-line aligned, as a model's tensors are: oneDNN's AMX kernels run at a quarter of their
  // speed on rows 16 bytes off a line.
  FloatBuffer a, b, c;
};

void run(const GemmCall& call, Operands& o) {
  gemm(call.trans_a, call.trans_b, call.m, call.n, call.k, 1.0f, o.a.data(), call.lda, o.b.data(),
       call.ldb, call.accumulate ? 1.0f : 0.0f, o.c.data(), call.ldc, call.split);
}

// Seconds per call of `call` on `library` in `precision` (bf16: oneDNN's bf16 matmul, whatever
// the library), over one window.
double seconds_per_call(GemmLibrary library, Precision precision, const GemmCall& call, Operands& o,
                        double window) {
  set_gemm_library(library);
  const PrecisionScope in_precision(precision);
  return seconds_per_run([&] { run(call, o); }, window);
}

std::string describe(const GemmCall& call) {
  const char* split = call.split == Split::kRows      ? "rows"
                      : call.split == Split::kColumns ? "columns"
                      : call.split == Split::kNone    ? "none"
                                                      : "auto";
  return fmt::format("{}x{}x{} {}{} split {}", call.m, call.n, call.k,
                     call.trans_a == Trans::kYes ? 'T' : 'N',
                     call.trans_b == Trans::kYes ? 'T' : 'N', split);
}

}  // namespace

GemmCeiling run_gemm_bench(const GemmBenchConfig& config, std::ostream& out) {
  if (config.batch_size < 1)
    throw UsageError(fmt::format("--batch_size {}: must be at least 1", config.batch_size));
  if (config.threads < 1)
    throw UsageError(fmt::format("--threads {}: must be at least 1", config.threads));
  if (config.reps < 1) throw UsageError(fmt::format("--reps {}: must be at least 1", config.reps));
  const GemmLibrary chosen = gemm_library();
  blas_set_threads(1);  // the team splits the products, as in training
  TrainConfig recipe = recipe_for(config.model);
  recipe.model.hidden_units = config.hidden_units;
  const std::unique_ptr<Model> model = make_model(recipe.model);
  const std::vector<Product> products = step_products(*model, config);
  ThreadTeam team(config.threads);
  ScopedTeam on_team(&team);
  const std::string bf16_reason = bf16_unsupported_reason();
  const bool bf16 = bf16_reason.empty();
  fmt::print(out,
             "dtrain bench gemm: model {}, batch {}, {} thread(s): the {} products of a step, "
             "OpenBLAS {} against oneDNN sgemm{}, median of {} interleaved rounds\n",
             config.model, config.batch_size, config.threads, products.size(), blas_kernel_name(),
             bf16 ? " and bf16 matmul" : "", config.reps);
  if (!bf16) fmt::print(out, "  bf16 not measured: {}\n", bf16_reason);
  fmt::print(out, "  {:<34} {:>6} {:>16} {:>16}{}\n", "product (m x n x k)", "calls",
             "OpenBLAS GFLOP/s", "oneDNN GFLOP/s",
             bf16 ? fmt::format(" {:>14}", "bf16 GFLOP/s") : "");
  double openblas_step = 0, onednn_step = 0, best_step = 0, bf16_step = 0;
  bool any_in_fp32 = false;
  for (const Product& p : products) {
    Operands operands(p.call);
    std::vector<double> openblas, onednn, bf16_times;
    for (int r = 0; r < config.reps; ++r) {
      openblas.push_back(seconds_per_call(GemmLibrary::kOpenBlas, Precision::kFp32, p.call,
                                          operands, config.seconds_per_rep));
      onednn.push_back(seconds_per_call(GemmLibrary::kOneDnn, Precision::kFp32, p.call, operands,
                                        config.seconds_per_rep));
      if (bf16) {
        bf16_times.push_back(seconds_per_call(GemmLibrary::kOneDnn, Precision::kBf16, p.call,
                                              operands, config.seconds_per_rep));
      }
    }
    const double o = median(openblas), d = median(onednn);
    const double flops = 2.0 * p.call.m * p.call.n * p.call.k;
    std::string bf16_column;
    if (bf16) {
      const double h = median(bf16_times);
      // Marked where --precision bf16 computes the product in fp32 (bf16_gemm_pays).
      const bool in_fp32 = !bf16_gemm_pays(p.call.m, p.call.n, p.call.k);
      bf16_column = fmt::format(" {:>14.1f}{}", flops / h * 1e-9, in_fp32 ? "*" : "");
      any_in_fp32 = any_in_fp32 || in_fp32;
      bf16_step += p.times * h;
    }
    fmt::print(out, "  {:<34} {:>6} {:>16.1f} {:>16.1f}{}\n", describe(p.call), p.times,
               flops / o * 1e-9, flops / d * 1e-9, bf16_column);
    openblas_step += p.times * o;
    onednn_step += p.times * d;
    best_step += p.times * std::min(o, d);
  }
  set_gemm_library(chosen);
  const std::vector<ConvTiming> convolutions =
      time_convolutions(*model, config.batch_size, config.seconds_per_rep, config.reps, bf16);
  if (!convolutions.empty()) {
    fmt::print(out, "  {:<34} {:>30}{}\n", "convolution, forward and backward",
               "fp32 ms (fastest kernels)", bf16 ? fmt::format(" {:>30}", "bf16 ms") : "");
  }
  for (const ConvTiming& c : convolutions) {
    const auto timed = [](double seconds, const std::string& kernels) {
      return fmt::format("{:.3f} ({})", seconds * 1e3, kernels);
    };
    fmt::print(out, "  {:<34} {:>30}{}\n", c.layer + " " + c.shape,
               timed(c.fp32_seconds, c.fp32_implementation),
               bf16 ? fmt::format(" {:>30}", timed(c.bf16_seconds, c.bf16_implementation)) : "");
    // The convolutions are the same work whichever library multiplies the matrices.
    openblas_step += c.fp32_seconds;
    onednn_step += c.fp32_seconds;
    best_step += c.fp32_seconds;
    bf16_step += c.bf16_seconds;
  }
  const double batch = config.batch_size;
  const GemmCeiling ceiling{batch / openblas_step, batch / onednn_step, batch / best_step,
                            bf16 ? batch / bf16_step : 0.0};
  fmt::print(out,
             "ceiling: {:.1f} examples/sec, each product on the faster library{} ({:.3f} ms a "
             "step); OpenBLAS alone {:.1f}, oneDNN alone {:.1f}\n",
             ceiling.best_examples_per_second,
             convolutions.empty() ? "" : " and each convolution on its fastest kernels",
             best_step * 1e3, ceiling.openblas_examples_per_second,
             ceiling.onednn_examples_per_second);
  if (bf16) {
    fmt::print(out,
               "bf16 ceiling: {:.1f} examples/sec, each product as --precision bf16 runs it, "
               "conversions included{} ({:.3f} ms a step)\n",
               ceiling.bf16_examples_per_second,
               convolutions.empty() ? "" : ", and each convolution on its fastest kernels",
               bf16_step * 1e3);
    if (any_in_fp32) {
      fmt::print(
          out,
          "  * computed in fp32 under --precision bf16: too shallow or too few rows for bf16 "
          "kernels to be faster\n");
    }
  }
  return ceiling;
}

}  // namespace dtrain::bench
