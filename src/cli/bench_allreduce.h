// `dtrain bench allreduce`: the all-reduce alone. N ranks run as local processes of this
// binary joined by loopback TCP, exactly as the allreduce strategy joins workers, and time
// back-to-back all-reduces of each size, reporting the median time, algorithm bandwidth and bus
// bandwidth.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "collective/communicator.h"
#include "comm/tcp_congestion.h"
#include "comm/transport.h"

namespace dtrain::cli {

struct AllreduceBenchConfig {
  int ranks = 2;
  std::vector<uint64_t> sizes = {4 << 10, 16 << 10, 64 << 10, 256 << 10,
                                 1 << 20, 4 << 20,  16 << 20, 64 << 20};
  uint64_t chunk_bytes = 512 << 10;  // the ring's largest message (CollectiveOptions)
  // Each size runs at least min_iters timed all-reduces and at least seconds_per_size.
  double seconds_per_size = 1.0;
  int min_iters = 10;
  int timeout_ms = 60'000;  // --collective_timeout
  int spin_us = -1;         // RingOptions::spin_us; -1: ring_spin_us()'s choice
  // --bind_to core: rank r runs on the r-th CPU it may use, where there are as many as ranks (as
  // mpirun binds ranks by default); none: wherever the scheduler puts it.
  bool bind_to_core = true;
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::kAuto;
  bool authenticate_frames = true;                  // ConnectionOptions::authenticate_frames
  std::string tcp_congestion = kTcpCongestionAuto;  // ConnectionOptions::tcp_congestion
  Transport transport = Transport::kAuto;           // RingOptions::transport
  std::string csv_path;                             // --csv: rank 0 appends a row per size there
};

// "auto", "ring", "halving_doubling": the --algorithm names.
std::string algorithm_name(AllreduceAlgorithm algorithm);

// Starts config.ranks rank processes on free loopback ports and relays rank 0's table to `out`.
// Returns the exit code: 0, or the first failed rank's. Throws UsageError for a bad config.
int run_allreduce_bench(const AllreduceBenchConfig& config, std::ostream& out);

// One rank process: joins the ring (rank r listens on hosts[r]:ports[r]; hosts empty: all on
// 127.0.0.1), times every size, and on rank 0 prints the table. Started by run_allreduce_bench, or
// by hand on hosts of their own (bench/netns_bench.sh). Throws CollectiveError if a rank fails.
void run_allreduce_bench_rank(const AllreduceBenchConfig& config, int rank,
                              const std::vector<uint16_t>& ports,
                              const std::vector<std::string>& hosts, const std::string& secret,
                              std::ostream& out);

}  // namespace dtrain::cli
