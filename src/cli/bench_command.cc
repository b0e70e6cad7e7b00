// `dtrain bench …`: end-to-end benchmarks (the micro-benchmarks are the dtrain_micro_bench binary).
#include <iostream>

#include "bench/drivers/train_bench.h"
#include "cli/commands.h"

namespace dtrain::cli {

void add_bench_command(CLI::App& app, Action& action) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks");
  bench->require_subcommand(1);
  auto config = std::make_shared<bench::TrainBenchConfig>();
  CLI::App* train =
      bench->add_subcommand("train", "Steady-state training throughput of one process");
  train->add_option("--model", config->model, "softmax | mlp | mnist_inference | lenet")
      ->capture_default_str();
  train->add_option("--hidden_units", config->hidden_units, "Hidden units of the mlp model")
      ->capture_default_str();
  train->add_option("--optimizer", config->optimizer,
                    "sgd | momentum | adam (default: the model's recipe)");
  train->add_option("--batch_size", config->batch_size, "Examples per step")->capture_default_str();
  train
      ->add_option("--threads", config->threads,
                   "Compute threads (default: the cores this process may use)")
      ->capture_default_str();
  train->add_option("--towers", config->towers, "Model replicas on separate threads")
      ->capture_default_str();
  train->add_option("--warmup_secs", config->warmup_seconds, "Warm-up before timing")
      ->capture_default_str();
  train->add_option("--secs", config->seconds_per_rep, "Seconds per timed repetition")
      ->capture_default_str();
  train->add_option("--reps", config->reps, "Timed repetitions (the median is reported)")
      ->capture_default_str();
  train->callback([config, &action] {
    action = [config] {
      bench::run_train_bench(*config, std::cout);
      return 0;
    };
  });
}

}  // namespace dtrain::cli
