// What a worker's PsClient is given (ps/ps_client.h).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "comm/connection_options.h"
#include "comm/host_port.h"
#include "nn/param_set.h"

namespace dtrain {

struct PsClientOptions {
  std::vector<HostPort> ps;  // addresses of ps0, ps1, ...
  std::string secret;
  ConnectionOptions connection;  // its task_name is set per ps
  // This worker's id, 0..total_num_replicas-1, or -1 for a client that never pushes (a benchmark
  // probe, an evaluator).
  int worker = -1;
  // What this worker trains (ps/job_settings.h), said to every ps before its hello: a ps started
  // without them takes the chief's, and refuses a worker whose settings differ from its own.
  // Empty: not said (a benchmark probe).
  std::string settings;
  // Told of each lost ps and of its return, one line each (not one per step); may be empty.
  std::function<void(const std::string&)> report;
  // How payloads travel to a ps (comm/transport.h), agreed in each connection's link step: kAuto
  // by reference where the ps is on this host and both prove they reach the other's memory, else
  // TCP; kTcp always TCP; kShm fails the connection (LinkRefused naming the flag, both tasks and
  // why) where memory does not work.
  Transport transport = Transport::kAuto;
  // The chief's: its latest copy of the values (what its pulls and push-pulls write into). A ps
  // that comes back without its variables (restarted, no checkpoint to restore) is re-seeded
  // from it at the step it was last seen at, and the client says so. Null for the other workers,
  // which wait for the chief to do that. The client reads it only while an operation is under
  // way, which the caller's blocking already ensures is not while it is written.
  const ParamSet* reseed_from = nullptr;
  // A push and pull, or a pull, that waits longer than this on a ps task is reported to
  // `stall_report`, from a watchdog thread of the client's (base/wait_watch.h; --stall_warning),
  // `stall_why` ending each line. 0 (or no stall_report): never.
  int stall_warning_ms = 0;
  std::string stall_why;
  std::function<void(const std::string&)> stall_report;  // called from another thread
};

}  // namespace dtrain
