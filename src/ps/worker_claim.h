// A worker that joins a running async job asks its ps0 for an identity (ps/ps_protocol.h,
// kClaimWorker): which worker it is, the job's --workers, and where the ps tasks are.
#pragma once

#include <string>

#include "comm/host_port.h"
#include "ps/ps_client_options.h"

namespace dtrain {

struct ClaimedWorker {
  int worker = -1;
  int job_workers = 0;   // the job's --workers
  std::string ps_hosts;  // host:port,host:port
};

// Connects to ps0 (options.ps holds its address alone; options.worker is -1), asks, and returns
// the answer. Throws Error with ps0's words where it has no identity to give (every one taken, or
// a job that takes no joiners), TransportError where it cannot be reached, or its reply does not
// come whole, within timeout_ms (a cut reply is asked for again: ps0 holds one claim a process).
ClaimedWorker claim_worker(const PsClientOptions& options, int timeout_ms);

}  // namespace dtrain
