// How one size is measured: the ps tasks listen on ephemeral loopback ports; each worker thread
// connects its own PsClient; worker 0 initialises the ps tasks, as a chief would, and the others
// wait for it. The workers then warm up and time their rounds together, meeting at a barrier
// before each phase, so every timed round runs against the same contention. A worker's figure is
// its median round, which a stray slow round (a page fault, the scheduler) does not move.
#include "cli/bench_ps.h"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstddef>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "base/error.h"
#include "cli/byte_size.h"
#include "cli/commands.h"
#include "cli/csv_rows.h"
#include "comm/tcp_congestion.h"
#include "nn/param_set.h"
#include "ps/partition.h"
#include "ps/ps_client.h"
#include "ps/ps_service.h"

namespace dtrain::cli {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kRowFloats = 1024;          // a 4 KiB row: shards are cut between rows
constexpr size_t kMinShardBytes = 64 * 1024;  // the trainer's default (PsClusterConfig)
constexpr float kLearningRate = 1e-6f;        // keeps the values finite over any number of rounds
constexpr int kWarmupRounds = 3;
constexpr int kReadyTimeoutMs = 60'000;
// The timed rounds' buffer is sized from the warm-up, so the timed loop never allocates: room for
// this many times the rounds the fastest warm-up round predicts, within kMaxRounds.
constexpr double kRoundsHeadroom = 4.0;
constexpr double kMaxRounds = 1 << 22;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

void check_config(const PsBenchConfig& config) {
  if (config.ps < 1) throw UsageError(fmt::format("--ps {}: must be at least 1", config.ps));
  if (config.workers < 1)
    throw UsageError(fmt::format("--workers {}: must be at least 1", config.workers));
  if (config.min_rounds < 1)
    throw UsageError(fmt::format("--min_rounds {}: must be at least 1", config.min_rounds));
  if (config.model_bytes.empty()) throw UsageError("--model_bytes: give at least one size");
  using Role = PsBenchConfig::Role;
  if (config.role != Role::kBoth && static_cast<int>(config.ports.size()) != config.ps) {
    throw UsageError(fmt::format("--ports names {} ports for --ps {}: give one per ps task",
                                 config.ports.size(), config.ps));
  }
  for (uint64_t bytes : config.model_bytes) {
    if (bytes < sizeof(float))
      throw UsageError(fmt::format("--model_bytes {}: must be at least 4 (one float)", bytes));
  }
}

// One variable of (rows, 1024) floats: the whole rows that fit in model_bytes, or, for a model
// smaller than a row, one row of model_bytes / 4 floats. REQUIRES: model_bytes >= 4.
std::vector<ParamSpec> bench_layout(uint64_t model_bytes) {
  const auto floats = static_cast<int64_t>(model_bytes / sizeof(float));
  const Shape shape =
      floats < kRowFloats ? Shape{1, floats} : Shape{floats / kRowFloats, kRowFloats};
  return {ParamSpec{.name = "bench/weights", .shape = shape}};
}

// The ps tasks of one size: async plain SGD, listening on config.host.
struct PsTasks {
  std::vector<std::unique_ptr<PsService>> services;
  std::vector<HostPort> addresses;
};

PsTasks start_ps_tasks(const std::vector<ParamSpec>& specs, const PartitionMap& map,
                       const PsBenchConfig& config, const std::string& secret) {
  PsTasks tasks;
  for (int p = 0; p < map.num_ps(); ++p) {
    PsServiceOptions options;
    options.ps = p;
    options.specs = specs;
    options.map = map;
    options.sync.total_num_replicas = config.workers;
    options.server.bind_host = config.host;
    if (!config.ports.empty()) options.server.port = config.ports[static_cast<size_t>(p)];
    options.server.secret = secret;
    options.server.connection.authenticate_frames = config.authenticate_frames;
    options.server.connection.tcp_congestion = config.tcp_congestion;
    options.transport = config.transport;
    tasks.services.push_back(std::make_unique<PsService>(std::move(options)));
    tasks.addresses.push_back({config.host, tasks.services.back()->port()});
  }
  return tasks;
}

// What the workers of one size share.
struct SizeRun {
  const PsBenchConfig& config;
  const std::vector<ParamSpec>& specs;
  const PartitionMap& map;
  PsClientOptions client;  // without the worker id
  // The workers meet here after connecting and after warming up (kMeetings in all).
  std::barrier<> phases;
};
constexpr int kMeetings = 2;

// This worker's connection to every ps task, once they hold values: worker 0 initialises them
// with zeros; the others wait for it.
std::unique_ptr<PsClient> ready_client(const SizeRun& run, int worker, const ParamSet& params) {
  PsClientOptions options = run.client;
  options.worker = worker;
  auto client = std::make_unique<PsClient>(params, run.map, std::move(options));
  if (worker == 0) {
    client->initialize(params, {}, 0);
  } else if (!client->wait_ready(kReadyTimeoutMs)) {
    throw Error(fmt::format("worker {}: worker 0 did not initialise the ps tasks within {} s",
                            worker, kReadyTimeoutMs / 1000));
  }
  return client;
}

// Rounds until there are kWarmupRounds and min_seconds has passed: first-touch page faults, the
// sockets' buffers growing. Returns the fastest round's seconds.
double warm_up(PsClient& client, const GradSet& grads, ParamSet& params, double min_seconds) {
  double fastest = std::numeric_limits<double>::infinity();
  const auto start = Clock::now();
  for (int r = 0; r < kWarmupRounds || seconds(Clock::now() - start) < min_seconds; ++r) {
    const auto round_start = Clock::now();
    client.push_pull(grads, params, kLearningRate);
    fastest = std::min(fastest, seconds(Clock::now() - round_start));
  }
  return fastest;
}

// Rounds until there are min_rounds and seconds_per_size has passed, or the buffer (sized from
// fastest_round before the clock starts) is full. Returns each round's seconds.
std::vector<double> timed_rounds(PsClient& client, const GradSet& grads, ParamSet& params,
                                 const PsBenchConfig& config, double fastest_round) {
  const double predicted = config.seconds_per_size / std::max(fastest_round, 1e-9);
  const size_t min_rounds = static_cast<size_t>(config.min_rounds);
  std::vector<double> times(min_rounds +
                            static_cast<size_t>(std::min(kRoundsHeadroom * predicted, kMaxRounds)));
  size_t n = 0;
  const auto start = Clock::now();
  auto end = start;
  do {
    const auto round_start = Clock::now();
    client.push_pull(grads, params, kLearningRate);
    end = Clock::now();
    times[n++] = seconds(end - round_start);
  } while (n < times.size() && (n < min_rounds || seconds(end - start) < config.seconds_per_size));
  times.resize(n);
  return times;
}

// What one worker measured, or why it could not.
struct WorkerTimes {
  std::vector<double> round_seconds;
  int memory_paths = 0;  // of its connections, those whose payloads went through memory
  std::exception_ptr error;
};

void run_worker(SizeRun& run, int worker, WorkerTimes& result) {
  int met = 0;
  const auto meet = [&] {
    run.phases.arrive_and_wait();
    ++met;
  };
  try {
    ParamSet params(run.specs);
    GradSet grads(run.specs);
    std::ranges::fill(grads.values(0), 1.0f);
    const std::unique_ptr<PsClient> client = ready_client(run, worker, params);
    for (int p = 0; p < run.map.num_ps(); ++p)
      result.memory_paths += client->link_traits(p).in_memory;
    meet();
    const double fastest = warm_up(*client, grads, params, run.config.warmup_seconds);
    meet();
    result.round_seconds = timed_rounds(*client, grads, params, run.config, fastest);
    client->worker_done(/*finished=*/true);
  } catch (...) {
    result.error = std::current_exception();
    // The others must not wait at a barrier for a worker that will never arrive.
    if (met < kMeetings) run.phases.arrive_and_drop();
  }
}

double median(std::vector<double> values) {
  const auto middle = values.begin() + static_cast<ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), middle, values.end());
  return *middle;
}

struct SizeResult {
  std::string transport;     // "shm" (every connection through memory), "tcp", or "mixed"
  uint64_t model_bytes = 0;  // as laid out: whole rows
  size_t shards = 0;
  size_t rounds = 0;                         // the fewest timed rounds of any worker
  std::vector<double> median_round_seconds;  // per worker
};

SizeResult bench_size(const PsBenchConfig& config, uint64_t requested_bytes,
                      const std::string& secret) {
  const std::vector<ParamSpec> specs = bench_layout(requested_bytes);
  const PartitionMap map = make_partition(ParamSet(specs), config.ps, Placement::kBalanced,
                                          kMinShardBytes, config.max_shard_bytes);
  using Role = PsBenchConfig::Role;
  PsTasks tasks;
  if (config.role != Role::kWorkers) tasks = start_ps_tasks(specs, map, config, secret);
  if (config.role == Role::kPs) {
    fmt::print("ps tasks serving {} bytes on {}:{}\n", requested_bytes, config.host,
               fmt::join(config.ports, ","));
    std::cout.flush();
    for (auto& service : tasks.services) service->run();  // until every worker is done
    return {};
  }
  if (config.role == Role::kWorkers) {
    for (const uint16_t port : config.ports) tasks.addresses.push_back({config.host, port});
  }
  PsClientOptions client;
  client.ps = tasks.addresses;
  client.secret = secret;
  client.connection.authenticate_frames = config.authenticate_frames;
  client.connection.tcp_congestion = config.tcp_congestion;
  client.transport = config.transport;
  SizeRun run{config, specs, map, std::move(client), std::barrier<>(config.workers)};
  std::vector<WorkerTimes> workers(static_cast<size_t>(config.workers));
  {
    std::vector<std::jthread> threads;
    for (size_t w = 0; w < workers.size(); ++w)
      threads.emplace_back([&, w] { run_worker(run, static_cast<int>(w), workers[w]); });
  }
  // Worker 0 failing first is the likelier root cause of the others' errors.
  for (const WorkerTimes& w : workers)
    if (w.error) std::rethrow_exception(w.error);
  // Every worker has reported done, so each run() returns at once, having stopped its server.
  for (auto& service : tasks.services) service->run();

  SizeResult result;
  for (int p = 0; p < map.num_ps(); ++p) result.model_bytes += map.bytes_on(p);
  result.shards = map.shards.size();
  result.rounds = workers[0].round_seconds.size();
  int memory_paths = 0;
  for (const WorkerTimes& w : workers) memory_paths += w.memory_paths;
  result.transport = memory_paths == 0                            ? "tcp"
                     : memory_paths == config.workers * config.ps ? "shm"
                                                                  : "mixed";
  for (WorkerTimes& w : workers) {
    result.rounds = std::min(result.rounds, w.round_seconds.size());
    result.median_round_seconds.push_back(median(std::move(w.round_seconds)));
  }
  return result;
}

// Printed once the first size has run: it says which way that size's payloads actually went.
void print_header(const PsBenchConfig& config, const std::string& transport, std::ostream& out) {
  const std::string shards =
      config.max_shard_bytes == 0
          ? "shards not cut"
          : fmt::format("shards cut at {}", format_bytes(config.max_shard_bytes));
  const std::string payloads =
      transport == "shm"   ? "payloads copied by the ps out of and into the workers' memory "
                             "(process_vm_readv/writev), announced through shared mailboxes"
      : transport == "tcp" ? (config.role == PsBenchConfig::Role::kWorkers
                                  ? "payloads over TCP to ps tasks at " + config.host
                                  : std::string("payloads over loopback TCP"))
                           : "payloads through memory on some connections, TCP on others";
  fmt::print(out,
             "dtrain bench ps: {} ps, {} worker(s) (threads of this process), async sgd, {} "
             "(--transport {}), {}, frames {}, TCP congestion control {}; per size at least {} "
             "rounds and {:g} s\n",
             config.ps, config.workers, payloads, transport_name(config.transport), shards,
             config.authenticate_frames ? "tagged (GMAC)" : "with a CRC32C (unauthenticated)",
             tcp_congestion_in_use(config.tcp_congestion), config.min_rounds,
             config.seconds_per_size);
  fmt::print(out,
             "round_ms: each worker's median push_pull round; GB/s/worker = 2 x model_bytes / "
             "round; GB/s total: the sum over workers\n");
  fmt::print(out, "{:>11} {:>6} {:>7} {:>16} {:>16} {:>10}\n", "model_bytes", "shards", "rounds",
             "round_ms", "GB/s/worker", "GB/s total");
}

// The per-worker columns list every worker's figure, "/"-separated.
void print_row(const SizeResult& r, std::ostream& out) {
  std::string round_ms, worker_gbps;
  double total_gbps = 0;
  for (double s : r.median_round_seconds) {
    const double gbps = 2.0 * static_cast<double>(r.model_bytes) / s / 1e9;
    const char* separator = round_ms.empty() ? "" : "/";
    round_ms += fmt::format("{}{:.3f}", separator, s * 1e3);
    worker_gbps += fmt::format("{}{:.3f}", separator, gbps);
    total_gbps += gbps;
  }
  fmt::print(out, "{:>11} {:>6} {:>7} {:>16} {:>16} {:>10.3f}\n", r.model_bytes, r.shards, r.rounds,
             round_ms, worker_gbps, total_gbps);
  out << std::flush;
}

// One row per size: the workers' median rounds averaged, and the sum of their bandwidths.
void add_csv_row(const PsBenchConfig& config, const SizeResult& r, CsvRows& csv) {
  double mean_round = 0, total_gbps = 0;
  for (double s : r.median_round_seconds) {
    mean_round += s / static_cast<double>(r.median_round_seconds.size());
    total_gbps += 2.0 * static_cast<double>(r.model_bytes) / s / 1e9;
  }
  csv.add({std::to_string(config.ps), std::to_string(config.workers), r.transport,
           std::to_string(r.model_bytes), std::to_string(r.shards), std::to_string(r.rounds),
           fmt::format("{:.4f}", mean_round * 1e3),
           fmt::format("{:.4f}", total_gbps / static_cast<double>(config.workers)),
           fmt::format("{:.4f}", total_gbps)});
}

}  // namespace

void run_ps_bench(const PsBenchConfig& config, const std::string& secret, std::ostream& out) {
  check_config(config);
  std::optional<CsvRows> csv;
  if (!config.csv_path.empty()) {
    csv.emplace(config.csv_path,
                std::vector<std::string>{"ps", "workers", "transport", "model_bytes", "shards",
                                         "rounds", "round_ms", "gbps_per_worker", "gbps_total"});
  }
  bool header_printed = false;
  for (uint64_t bytes : config.model_bytes) {
    const SizeResult result = bench_size(config, bytes, secret);
    if (config.role == PsBenchConfig::Role::kPs) continue;
    if (!std::exchange(header_printed, true)) print_header(config, result.transport, out);
    print_row(result, out);
    if (csv) add_csv_row(config, result, *csv);
  }
}

}  // namespace dtrain::cli
