// `dtrain bench ps`: the parameter-server round trip alone. P ps tasks and W workers run as threads
// of one process over loopback TCP, and every worker times push_pull rounds of an S-byte model
// with no gradient computation, so what is measured is framing, tags, copies, the optimizer's pass
// over the values, and the sockets, or, with payloads through memory, the ps's copies out of and
// into the workers' buffers (process_vm_readv / process_vm_writev, here within one process).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "comm/tcp_congestion.h"
#include "comm/transport.h"

namespace dtrain::cli {

struct PsBenchConfig {
  int ps = 1;
  int workers = 1;
  // One line of output per size; the model is one (rows, 1024) float variable of about this size.
  std::vector<uint64_t> model_bytes = {4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
  // Shards longer than this travel as several frames, pipelined (as in the trainer); 0: never cut.
  uint64_t max_shard_bytes = 512 << 10;  // PsClusterConfig's
  double warmup_seconds = 0.2;
  // Each size runs at least min_rounds timed rounds and at least seconds_per_size.
  double seconds_per_size = 1.0;
  int min_rounds = 10;
  // Frames tagged after the handshake (ConnectionOptions::authenticate_frames), as in training.
  bool authenticate_frames = true;
  std::string tcp_congestion = kTcpCongestionAuto;  // ConnectionOptions::tcp_congestion
  Transport transport = Transport::kAuto;           // PsClientOptions / PsServiceOptions::transport
  std::string csv_path;                             // --csv: a row per size is appended there too
  // Between hosts of their own (bench/netns_ps.sh): one process runs the ps tasks (kPs), another
  // the workers (kWorkers), the ps tasks at host:ports[p], the secret shared through
  // $DTRAIN_SECRET. A kPs process returns once every worker has said it is done.
  enum class Role { kBoth, kPs, kWorkers };
  Role role = Role::kBoth;
  std::string host = "127.0.0.1";
  std::vector<uint16_t> ports;  // one per ps task; empty: free ports (kBoth only)
};

// Runs every size of the config in turn and prints one line per size. Throws UsageError for a bad
// config, TransportError / Error when a task fails.
// `secret`: the cluster secret (a new one for kBoth, whose tasks are all threads of this process).
void run_ps_bench(const PsBenchConfig& config, const std::string& secret, std::ostream& out);

}  // namespace dtrain::cli
