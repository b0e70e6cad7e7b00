// How a size is measured: a few warm-up all-reduces (which also grow the ring's buffers to their
// final size), then rank 0 picks an iteration count from the fastest one and broadcasts it, the
// ranks meet at a barrier, and every rank times each all-reduce back to back. The per-iteration
// times are averaged over the ranks (one more all-reduce) and the median is reported, which a stray
// slow iteration does not move.
#include "cli/bench_allreduce.h"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "base/cpu.h"
#include "base/error.h"
#include "cli/byte_size.h"
#include "cli/commands.h"
#include "cli/csv_rows.h"
#include "cluster/free_ports.h"
#include "cluster/local_launcher.h"
#include "collective/communicator.h"
#include "collective/tcp_ring.h"
#include "comm/tcp_congestion.h"
#include "tensor/aligned.h"

namespace dtrain::cli {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kWarmupIters = 3;
constexpr int kMaxIters = 100'000;

void check_config(const AllreduceBenchConfig& config) {
  if (config.ranks < 1)
    throw UsageError(fmt::format("--ranks {}: must be at least 1", config.ranks));
  if (config.sizes.empty()) throw UsageError("--bytes: give at least one size");
  for (uint64_t bytes : config.sizes) {
    if (bytes < sizeof(float) || bytes % sizeof(float) != 0) {
      throw UsageError(
          fmt::format("--bytes {}: must be a positive multiple of 4 (float32)", bytes));
    }
  }
  if (config.chunk_bytes < sizeof(float)) {
    throw UsageError(fmt::format("--chunk_bytes {}: must be at least 4", config.chunk_bytes));
  }
  if (config.min_iters < 1) {
    throw UsageError(fmt::format("--min_iters {}: must be at least 1", config.min_iters));
  }
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<float> values) {
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  return values[mid];
}

// How rank 0's chunks travel: every rank's links are alike on one host.
std::string payload_path(const TcpRing& ring, bool one_host) {
  if (ring.size() == 1) return "none";
  if (ring.reads_memory(Side::kLeft) && ring.reads_memory(Side::kRight)) {
    return ring.shares_mailbox(Side::kLeft) && ring.shares_mailbox(Side::kRight)
               ? "copied out of the sender's memory (process_vm_readv), announced through a "
                 "shared mailbox, keepalives over loopback TCP"
               : "copied out of the sender's memory (process_vm_readv), frames over loopback TCP";
  }
  return one_host ? "loopback TCP" : "TCP between hosts";
}

void print_header(const AllreduceBenchConfig& config, const std::string& where,
                  const std::string& payloads, std::ostream& out) {
  fmt::print(out,
             "all-reduce (sum, float32, algorithm {}) over {} ranks, {}; payloads {}; "
             "chunks of {}, frames {}; TCP congestion control {}\nbusbw = algbw x 2(n-1)/n, the "
             "convention of NCCL's and Gloo's "
             "benchmarks; "
             "GB/s = 1e9 bytes/s\n",
             algorithm_name(config.algorithm), config.ranks, where, payloads,
             format_bytes(config.chunk_bytes),
             config.authenticate_frames ? "tagged (GMAC)" : "with a CRC32C (unauthenticated)",
             tcp_congestion_in_use(config.tcp_congestion));
  fmt::print(out, "{:>10} {:>8} {:>11} {:>11} {:>11}\n", "bytes", "iters", "median_ms",
             "algbw_GB/s", "busbw_GB/s");
  out.flush();
}

// Times one size on every rank; returns the median seconds (the same on every rank).
double time_size(Communicator& communicator, const AllreduceBenchConfig& config, uint64_t bytes,
                 int& iters) {
  FloatBuffer data(bytes / sizeof(float), 0.0f);  // zeros stay zeros, however many sums
  double fastest = 1e30;
  for (int i = 0; i < kWarmupIters; ++i) {
    const auto start = Clock::now();
    communicator.allreduce(data);
    fastest = std::min(fastest, seconds_since(start));
  }
  float count = static_cast<float>(
      std::clamp(std::ceil(config.seconds_per_size / std::max(fastest, 1e-7)),
                 static_cast<double>(config.min_iters), static_cast<double>(kMaxIters)));
  communicator.broadcast(std::span(&count, 1));  // every rank runs rank 0's count
  iters = static_cast<int>(count);
  std::vector<float> times(iters);
  communicator.barrier();
  for (float& time : times) {
    const auto start = Clock::now();
    communicator.allreduce(data);
    time = static_cast<float>(seconds_since(start));
  }
  communicator.allreduce(times, ReduceOp::kAverage);
  return median(std::move(times));
}

std::vector<std::string> csv_columns() {
  return {"ranks", "transport", "algorithm",  "bytes",
          "iters", "median_ms", "algbw_gbps", "busbw_gbps"};
}

std::string join_ports(const std::vector<uint16_t>& ports) {
  return fmt::format("{}", fmt::join(ports, ","));
}

std::string join_sizes(const std::vector<uint64_t>& sizes) {
  return fmt::format("{}", fmt::join(sizes, ","));
}

}  // namespace

std::string algorithm_name(AllreduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllreduceAlgorithm::kRing:
      return "ring";
    case AllreduceAlgorithm::kHalvingDoubling:
      return "halving_doubling";
    case AllreduceAlgorithm::kAuto:
      break;
  }
  return "auto";
}

int run_allreduce_bench(const AllreduceBenchConfig& config, std::ostream& out) {
  check_config(config);
  // A file that cannot take the rows is one error here rather than rank 0's after the others start.
  if (!config.csv_path.empty()) CsvRows(config.csv_path, csv_columns());
  const std::vector<uint16_t> ports = pick_free_ports(config.ranks);
  std::vector<LocalTask> tasks;
  for (int r = 0; r < config.ranks; ++r) {
    LocalTask task;
    task.name = fmt::format("rank{}", r);
    task.prefix_output = r != 0;  // rank 0 prints the table; the others speak only of failures
    task.args = {"bench",
                 "allreduce",
                 "--rank",
                 std::to_string(r),
                 "--ports",
                 join_ports(ports),
                 "--ranks",
                 std::to_string(config.ranks),
                 "--bytes",
                 join_sizes(config.sizes),
                 "--chunk_bytes",
                 std::to_string(config.chunk_bytes),
                 "--secs",
                 fmt::format("{}", config.seconds_per_size),
                 "--min_iters",
                 std::to_string(config.min_iters),
                 "--collective_timeout",
                 fmt::format("{}", config.timeout_ms / 1000.0),
                 "--spin_us",
                 std::to_string(config.spin_us),
                 "--algorithm",
                 algorithm_name(config.algorithm),
                 "--transport",
                 std::string(transport_name(config.transport)),
                 "--bind_to",
                 config.bind_to_core ? "core" : "none",
                 "--tcp_congestion",
                 config.tcp_congestion};
    if (!config.csv_path.empty()) task.args.insert(task.args.end(), {"--csv", config.csv_path});
    if (!config.authenticate_frames) task.args.push_back("--unauthenticated_frames");
    tasks.push_back(std::move(task));
  }
  LaunchOptions options;
  options.binary = "/proc/self/exe";
  options.extra_env = {"DTRAIN_SECRET=" + new_cluster_secret()};
  const LaunchResult result = run_local_cluster(tasks, options, out);
  for (const std::string& failure : result.failed) fmt::print(stderr, "error: {}\n", failure);
  return result.exit_code;
}

void run_allreduce_bench_rank(const AllreduceBenchConfig& config, int rank,
                              const std::vector<uint16_t>& ports,
                              const std::vector<std::string>& hosts, const std::string& secret,
                              std::ostream& out) {
  check_config(config);
  if (static_cast<int>(ports.size()) != config.ranks || rank < 0 || rank >= config.ranks) {
    throw UsageError(
        fmt::format("--rank {} with {} --ports for --ranks {}", rank, ports.size(), config.ranks));
  }
  if (!hosts.empty() && static_cast<int>(hosts.size()) != config.ranks) {
    throw UsageError(fmt::format("--hosts names {} hosts for --ranks {}: give one per rank",
                                 hosts.size(), config.ranks));
  }
  auto host_of = [&](int r) { return hosts.empty() ? std::string("127.0.0.1") : hosts[r]; };
  // Before the ring starts a thread. Ranks that share cores stay free: the scheduler balances them.
  std::optional<int> core;
  if (config.bind_to_core && config.ranks <= available_cores()) core = bind_to_core(rank);
  RingOptions options;
  options.size = config.ranks;
  options.rank = rank;
  options.bind_host = host_of(rank);
  options.port = ports[rank];
  options.secret = secret;
  options.authenticate_frames = config.authenticate_frames;
  options.tcp_congestion = config.tcp_congestion;
  options.timeout_ms = config.timeout_ms;
  options.job = "rank";
  options.spin_us =
      config.spin_us >= 0 ? config.spin_us : ring_spin_us(config.ranks, config.transport);
  options.transport = config.transport;
  TcpRing ring(options);
  const int right = (rank + 1) % config.ranks;
  ring.connect({host_of(right), ports[right]});
  Communicator communicator(ring,
                            {.max_chunk_bytes = config.chunk_bytes, .algorithm = config.algorithm});
  std::optional<CsvRows> csv;
  if (rank == 0) {
    const bool one_host = std::all_of(hosts.begin(), hosts.end(),
                                      [&](const std::string& h) { return h == host_of(0); });
    const std::string where =
        fmt::format("{}, {}", one_host ? "local processes" : "processes on their own hosts",
                    core ? "each bound to a core" : "not bound to cores");
    print_header(config, where, payload_path(ring, one_host), out);
    if (!config.csv_path.empty()) {
      csv.emplace(config.csv_path, csv_columns());
    }
  }
  const char* transport = ring.size() > 1 && ring.reads_memory(Side::kRight) ? "shm" : "tcp";
  const double n = config.ranks;
  for (uint64_t bytes : config.sizes) {
    int iters = 0;
    const double median_s = time_size(communicator, config, bytes, iters);
    const double algbw = static_cast<double>(bytes) / median_s / 1e9;
    if (rank != 0) continue;
    fmt::print(out, "{:>10} {:>8} {:>11.3f} {:>11.2f} {:>11.2f}\n", format_bytes(bytes), iters,
               median_s * 1e3, algbw, algbw * 2.0 * (n - 1) / n);
    out.flush();
    if (csv) {
      csv->add({std::to_string(config.ranks), transport, algorithm_name(config.algorithm),
                std::to_string(bytes), std::to_string(iters), fmt::format("{:.4f}", median_s * 1e3),
                fmt::format("{:.4f}", algbw), fmt::format("{:.4f}", algbw * 2.0 * (n - 1) / n)});
    }
  }
}

}  // namespace dtrain::cli
