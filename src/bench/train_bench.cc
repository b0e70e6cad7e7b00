// Steady-state step benchmark: warm up (first-touch page faults, BLAS buffers), then time repeated
// windows of whole steps and report the median window.
#include "bench/train_bench.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <stdexcept>
#include <vector>

#include "base/error.h"
#include "nn/init.h"
#include "nn/model_zoo.h"
#include "optim/optimizer.h"
#include "plan/flag_checks.h"
#include "plan/recipes.h"
#include "tensor/blas.h"
#include "train/gradient_computer.h"

namespace dtrain::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Window {
  double examples_per_second;
  StepTimes per_step;
};

}  // namespace

double run_train_bench(const TrainBenchConfig& config, std::ostream& out) {
  if (config.batch_size < 1)
    throw UsageError(fmt::format("--batch_size {}: must be at least 1", config.batch_size));
  if (config.threads < 1)
    throw UsageError(fmt::format("--threads {}: must be at least 1", config.threads));
  if (config.reps < 1) throw UsageError(fmt::format("--reps {}: must be at least 1", config.reps));
  TrainConfig recipe = recipe_for(config.model);
  recipe.model.hidden_units = config.hidden_units;
  if (!config.optimizer.empty()) recipe.optimizer.name = config.optimizer;
  try {
    recipe.model.conv_kernels = parse_conv_implementation(config.conv_kernels);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  try {
    if (!config.gemm.empty()) set_gemm_library(parse_gemm_library(config.gemm));
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("--gemm {}: {}", config.gemm, e.what()));
  }

  const Precision precision = usable_precision(config.precision);

  blas_set_threads(1);  // the towers' teams split the products; see GradientComputer
  std::unique_ptr<Model> model = make_model(recipe.model);
  ParamSet params(model->param_specs());
  GradSet grads(model->param_specs());
  initialize_params(params, 1);
  std::unique_ptr<Optimizer> optimizer = make_optimizer(recipe.optimizer, model->param_specs());
  GradientComputer computer(*model, config.towers, config.batch_size,
                            threads_per_tower(config.threads, config.towers));
  computer.set_precision(precision, precision);

  std::mt19937_64 rng(7);
  std::vector<float> images(static_cast<size_t>(config.batch_size) * model->input_size());
  std::vector<int32_t> labels(config.batch_size);
  for (float& x : images) x = static_cast<float>(rng() % 256) / 255.0f;
  for (int32_t& y : labels) y = static_cast<int32_t>(rng() % model->num_classes());
  const Batch batch{images.data(), labels.data(), config.batch_size};
  // A small rate keeps random-label training finite; the cost of an update does not depend on it.
  const float lr = std::min(recipe.learning_rate, 1e-3f);

  int64_t step = 0;
  const GradientComputer::ChunkUpdate update = [&](size_t begin, size_t end) {
    optimizer->apply(params, grads, lr, step, begin, end);
  };
  // The step the trainer takes for this optimizer (see LocalRun::train_step).
  const bool fold_sgd = optimizer->plain_sgd() && computer.towers() == 1;
  auto run_step = [&](StepTimes* times) {
    if (fold_sgd) {
      computer.sgd_step(params, batch, grads, lr, times);
    } else {
      computer.compute(params, batch, grads, times, &update);
    }
    ++step;
  };

  fmt::print(out,
             "dtrain bench train: model {} ({} parameters), optimizer {}, batch {}, {} thread(s), "
             "{} tower(s), precision {}, kernels {}\n",
             model->name(), params.num_values(), optimizer->name(), config.batch_size,
             config.threads, config.towers, precision_name(precision), model->kernels());
  const auto warm_start = Clock::now();
  while (std::chrono::duration<double>(Clock::now() - warm_start).count() < config.warmup_seconds)
    run_step(nullptr);

  std::vector<Window> windows;
  for (int r = 0; r < config.reps; ++r) {
    StepTimes times;
    int64_t steps = 0;
    const auto start = Clock::now();
    double elapsed = 0;
    do {
      run_step(&times);
      ++steps;
      elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    } while (elapsed < config.seconds_per_rep);
    const double n = static_cast<double>(steps);
    windows.push_back({n * config.batch_size / elapsed,
                       {times.forward_s / n, times.backward_s / n, times.update_s / n}});
    fmt::print(out, "  rep {}: {:.1f} examples/sec\n", r + 1, windows.back().examples_per_second);
  }
  std::sort(windows.begin(), windows.end(), [](const Window& a, const Window& b) {
    return a.examples_per_second < b.examples_per_second;
  });
  const Window& median = windows[windows.size() / 2];
  const StepTimes& t = median.per_step;
  const double step_ms = (t.forward_s + t.backward_s + t.update_s) * 1e3;
  fmt::print(out, "examples/sec: median {:.1f} (min {:.1f}, max {:.1f}) over {} reps of {:.1f} s\n",
             median.examples_per_second, windows.front().examples_per_second,
             windows.back().examples_per_second, config.reps, config.seconds_per_rep);
  fmt::print(out,
             "step time: {:.3f} ms = forward {:.3f} ms + backward {:.3f} ms + update {:.3f} ms\n",
             step_ms, t.forward_s * 1e3, t.backward_s * 1e3, t.update_s * 1e3);
  return median.examples_per_second;
}

}  // namespace dtrain::bench
