// `dtrain bench …`: end-to-end benchmarks (the micro-benchmarks are the dtrain_micro_bench binary).
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "bench/drivers/train_bench.h"
#include "cli/bench_ps.h"
#include "cli/commands.h"

namespace dtrain::cli {
namespace {

// The sizes stay text until the action runs, so a bad one is a UsageError naming its flag.
struct PsBenchFlags {
  PsBenchConfig config;
  std::vector<std::string> model_bytes;  // empty: the config's default sizes
  std::string max_shard_bytes = "1MiB";
};

PsBenchConfig resolve(const PsBenchFlags& flags) {
  PsBenchConfig config = flags.config;
  if (!flags.model_bytes.empty()) {
    config.model_bytes.clear();
    for (const std::string& size : flags.model_bytes)
      config.model_bytes.push_back(parse_byte_size(size, "--model_bytes"));
  }
  config.max_shard_bytes = parse_byte_size(flags.max_shard_bytes, "--max_shard_bytes");
  return config;
}

void add_bench_ps_command(CLI::App& bench, Action& action) {
  auto flags = std::make_shared<PsBenchFlags>();
  CLI::App* ps = bench.add_subcommand(
      "ps", "Push+pull rounds through parameter servers over loopback TCP, without compute");
  ps->add_option("--ps", flags->config.ps, "ps tasks (threads of this process)")
      ->capture_default_str();
  ps->add_option("--workers", flags->config.workers, "Workers, each with its own connections")
      ->capture_default_str();
  ps->add_option("--model_bytes", flags->model_bytes,
                 "Model sizes, e.g. 4096,64KiB,16MiB (default: 4KiB to 64MiB)")
      ->delimiter(',');
  ps->add_option("--max_shard_bytes", flags->max_shard_bytes,
                 "Cut shards into pipelined frames of at most this size; 0: never")
      ->capture_default_str();
  ps->add_option("--warmup_secs", flags->config.warmup_seconds, "Warm-up before timing each size")
      ->capture_default_str();
  ps->add_option("--secs", flags->config.seconds_per_size, "Least seconds timed per size")
      ->capture_default_str();
  ps->add_option("--min_rounds", flags->config.min_rounds, "Least rounds timed per size")
      ->capture_default_str();
  ps->callback([flags, &action] {
    action = [flags] {
      run_ps_bench(resolve(*flags), std::cout);
      return 0;
    };
  });
}

}  // namespace

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
  add_bench_ps_command(*bench, action);
}

}  // namespace dtrain::cli
