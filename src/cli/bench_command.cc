// `dtrain bench …`: end-to-end benchmarks (the micro-benchmarks are the dtrain_micro_bench binary).
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "bench/gemm_bench.h"
#include "bench/train_bench.h"
#include "cli/bench_allreduce.h"
#include "cli/bench_ps.h"
#include "cli/byte_size.h"
#include "cli/commands.h"
#include "cluster/cluster_secret.h"
#include "comm/tcp_congestion.h"
#include "plan/flags.h"

namespace dtrain::cli {
namespace {

// What a frame's tag costs is measured by turning tags off, as training's flag of the same name.
void add_frames_flag(CLI::App& command, bool& unauthenticated_frames) {
  command.add_flag("--unauthenticated_frames", unauthenticated_frames,
                   "Frames carry a CRC32C instead of a tag after the handshake (to measure the "
                   "tags' cost)");
}

// --transport means here what it means for train and task (both directions of a ps, a ring's
// chunks): its help and choices are the flag table's row (plan/flags.h), declared once.
void add_transport_flag(CLI::App& command, std::string& transport) {
  const FlagSpec& row = *find_flag("--transport");
  command.add_option(std::string(row.name), transport, std::string(row.help))
      ->check(CLI::IsMember(std::vector<std::string>(row.choices.begin(), row.choices.end())))
      ->capture_default_str();
}

// --tcp_congestion as for train and task; a name the host refuses is refused before any rank
// starts.
void add_tcp_congestion_flag(CLI::App& command, std::string& tcp_congestion) {
  const FlagSpec& row = *find_flag("--tcp_congestion");
  command.add_option(std::string(row.name), tcp_congestion, std::string(row.help))
      ->check([](const std::string& name) { return tcp_congestion_refusal(name); })
      ->capture_default_str();
}

// The sizes stay text until the action runs, so a bad one is a UsageError naming its flag.
struct PsBenchFlags {
  PsBenchConfig config;
  std::vector<std::string> model_bytes;  // empty: the config's default sizes
  std::string max_shard_bytes = "512KiB";
  std::string transport = "auto";
  bool unauthenticated_frames = false;
  std::string tcp_congestion = kTcpCongestionAuto;
  std::string csv_path;
  std::string role;
};

PsBenchConfig resolve(const PsBenchFlags& flags) {
  PsBenchConfig config = flags.config;
  if (!flags.model_bytes.empty()) {
    config.model_bytes.clear();
    for (const std::string& size : flags.model_bytes)
      config.model_bytes.push_back(parse_byte_size(size, "--model_bytes"));
  }
  config.max_shard_bytes = parse_byte_size(flags.max_shard_bytes, "--max_shard_bytes");
  config.authenticate_frames = !flags.unauthenticated_frames;
  config.tcp_congestion = flags.tcp_congestion;
  config.transport = parse_transport(flags.transport);
  config.csv_path = flags.csv_path;
  if (flags.role == "ps") config.role = PsBenchConfig::Role::kPs;
  if (flags.role == "workers") config.role = PsBenchConfig::Role::kWorkers;
  return config;
}

void add_bench_ps_command(CLI::App& bench, Action& action) {
  auto flags = std::make_shared<PsBenchFlags>();
  CLI::App* ps = bench.add_subcommand(
      "ps",
      "Push+pull rounds through parameter servers (shared memory or loopback TCP), without "
      "compute");
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
  add_transport_flag(*ps, flags->transport);
  add_frames_flag(*ps, flags->unauthenticated_frames);
  add_tcp_congestion_flag(*ps, flags->tcp_congestion);
  ps->add_option("--csv", flags->csv_path,
                 "Also append a row per size to this CSV file (a header first if new)");
  // Between hosts of their own: how bench/netns_ps.sh starts the two halves; not for users.
  ps->add_option("--role", flags->role)->check(CLI::IsMember({"ps", "workers"}))->group("");
  ps->add_option("--host", flags->config.host)->group("");
  ps->add_option("--ports", flags->config.ports)->delimiter(',')->group("");
  ps->callback([flags, &action] {
    action = [flags] {
      const PsBenchConfig config = resolve(*flags);
      // Alone, the ps tasks are this process's own threads: the secret is shared with itself.
      const std::string secret =
          config.role == PsBenchConfig::Role::kBoth ? new_cluster_secret() : cluster_secret("");
      run_ps_bench(config, secret, std::cout);
      return 0;
    };
  });
}

// Sizes stay text until the action runs, as for bench ps. --rank and --ports are how the launcher
// starts each rank process; they are not for users.
struct AllreduceBenchFlags {
  AllreduceBenchConfig config;
  std::vector<std::string> sizes;
  std::string chunk_bytes = "512KiB";
  std::string algorithm = "auto";
  std::string transport = "auto";
  std::string csv_path;
  double timeout_s = 60;
  int rank = -1;
  std::vector<uint16_t> ports;
  std::vector<std::string> hosts;
  std::string bind_to = "core";
  bool unauthenticated_frames = false;
  std::string tcp_congestion = kTcpCongestionAuto;
};

AllreduceBenchConfig resolve(const AllreduceBenchFlags& flags) {
  AllreduceBenchConfig config = flags.config;
  if (!flags.sizes.empty()) {
    config.sizes.clear();
    for (const std::string& size : flags.sizes)
      config.sizes.push_back(parse_byte_size(size, "--bytes"));
  }
  config.chunk_bytes = parse_byte_size(flags.chunk_bytes, "--chunk_bytes");
  for (const AllreduceAlgorithm algorithm : {AllreduceAlgorithm::kAuto, AllreduceAlgorithm::kRing,
                                             AllreduceAlgorithm::kHalvingDoubling}) {
    if (algorithm_name(algorithm) == flags.algorithm) config.algorithm = algorithm;
  }
  if (!(flags.timeout_s > 0)) {
    throw UsageError(fmt::format("--collective_timeout {}: must be positive", flags.timeout_s));
  }
  config.timeout_ms = static_cast<int>(flags.timeout_s * 1000);
  config.authenticate_frames = !flags.unauthenticated_frames;
  config.tcp_congestion = flags.tcp_congestion;
  config.transport = parse_transport(flags.transport);
  config.csv_path = flags.csv_path;
  config.bind_to_core = flags.bind_to == "core";
  return config;
}

void add_bench_allreduce_command(CLI::App& bench, Action& action) {
  auto flags = std::make_shared<AllreduceBenchFlags>();
  CLI::App* allreduce = bench.add_subcommand(
      "allreduce", "All-reduce between local processes (shared memory or loopback TCP)");
  allreduce->add_option("--ranks", flags->config.ranks, "Ranks (processes)")->capture_default_str();
  allreduce->add_option("--bytes", flags->sizes, "Sizes, e.g. 1MiB,64MiB (default: 4KiB to 64MiB)")
      ->delimiter(',');
  allreduce->add_option("--chunk_bytes", flags->chunk_bytes, "The ring's largest message")
      ->capture_default_str();
  allreduce->add_option("--secs", flags->config.seconds_per_size, "Least seconds timed per size")
      ->capture_default_str();
  allreduce->add_option("--min_iters", flags->config.min_iters, "Least all-reduces timed per size")
      ->capture_default_str();
  allreduce
      ->add_option("--collective_timeout", flags->timeout_s,
                   "Seconds without a message before a rank is declared lost")
      ->capture_default_str();
  allreduce
      ->add_option("--spin_us", flags->config.spin_us,
                   "Microseconds a waiting rank retries before it sleeps (default: 50, or 0 over "
                   "--transport tcp when ranks outnumber cores)")
      ->capture_default_str();
  allreduce
      ->add_option("--algorithm", flags->algorithm,
                   "auto, ring or halving_doubling (four ranks only; others use the ring)")
      ->check(CLI::IsMember({"auto", "ring", "halving_doubling"}))
      ->capture_default_str();
  add_transport_flag(*allreduce, flags->transport);
  allreduce
      ->add_option("--bind_to", flags->bind_to,
                   "core: each rank on a core of its own where there are enough (as mpirun "
                   "binds by default); none: where the scheduler puts it")
      ->check(CLI::IsMember({"core", "none"}))
      ->capture_default_str();
  allreduce->add_option("--csv", flags->csv_path,
                        "Also append a row per size to this CSV file (a header first if new)");
  add_frames_flag(*allreduce, flags->unauthenticated_frames);
  add_tcp_congestion_flag(*allreduce, flags->tcp_congestion);
  allreduce->add_option("--rank", flags->rank)->group("");
  allreduce->add_option("--ports", flags->ports)->delimiter(',')->group("");
  allreduce->add_option("--hosts", flags->hosts)->delimiter(',')->group("");
  allreduce->callback([flags, &action] {
    action = [flags] {
      const AllreduceBenchConfig config = resolve(*flags);
      if (flags->rank < 0) return run_allreduce_bench(config, std::cout);
      run_allreduce_bench_rank(config, flags->rank, flags->ports, flags->hosts, cluster_secret(""),
                               std::cout);
      return 0;
    };
  });
}

void add_bench_gemm_command(CLI::App& bench, Action& action) {
  auto config = std::make_shared<bench::GemmBenchConfig>();
  CLI::App* gemm = bench.add_subcommand(
      "gemm",
      "The machine's ceiling for a model's matrix products: OpenBLAS against oneDNN, and bf16");
  gemm->add_option("--model", config->model, "softmax | mlp | mnist_inference | lenet")
      ->capture_default_str();
  gemm->add_option("--hidden_units", config->hidden_units, "Hidden units of the mlp model")
      ->capture_default_str();
  gemm->add_option("--batch_size", config->batch_size, "Examples per step")->capture_default_str();
  gemm->add_option("--threads", config->threads, "Compute threads")->capture_default_str();
  gemm->add_option("--secs", config->seconds_per_rep, "Seconds per product, library and round")
      ->capture_default_str();
  gemm->add_option("--reps", config->reps, "Interleaved rounds (the median is reported)")
      ->capture_default_str();
  gemm->callback([config, &action] {
    action = [config] {
      bench::run_gemm_bench(*config, std::cout);
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
  train
      ->add_option(
          "--conv_kernels", config->conv_kernels,
          "Convolutions by auto | onednn | direct | im2col (auto: the fastest for each layer)")
      ->capture_default_str();
  train->add_option("--gemm", config->gemm,
                    "Matrix products by onednn | openblas (default: onednn)");
  train
      ->add_option("--precision", config->precision,
                   "fp32 | bf16: the steps' products and convolutions on bf16 inputs")
      ->capture_default_str();
  train->callback([config, &action] {
    action = [config] {
      bench::run_train_bench(*config, std::cout);
      return 0;
    };
  });
  add_bench_gemm_command(*bench, action);
  add_bench_ps_command(*bench, action);
  add_bench_allreduce_command(*bench, action);
}

}  // namespace dtrain::cli
