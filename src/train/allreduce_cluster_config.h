// What an all-reduce worker is told of its cluster and its ring, from the flags (plan/).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "cluster/cluster_spec.h"
#include "comm/host_port.h"
#include "comm/transport.h"

namespace dtrain {

struct AllreduceClusterConfig {
  ClusterConfig cluster;  // the training workers (no ps tasks) and this task
  std::string secret;     // the cluster secret, raw bytes
  // 0: each step's gradients are one all-reduce over the whole gradient arena. Otherwise buckets
  // of at most this many bytes (whole tensors where they fit; a larger tensor alone, cut into
  // pieces of this size), each all-reduced in turn. Every worker must use the same value.
  size_t fusion_bytes = 0;
  // The largest message of a collective (CollectiveOptions::max_chunk_bytes).
  size_t chunk_bytes = 512 * 1024;
  // How long a worker waits for the ring to form and for any message once it has: a lost or
  // stuck worker fails every other within this time, with an error naming it.
  int collective_timeout_ms = 60'000;
  // A wait inside a collective reported past this (RingOptions::stall_warning_ms; 0: never).
  int stall_warning_ms = 3000;
  // How chunks reach a worker on the same host (--transport; comm/transport.h).
  Transport transport = Transport::kAuto;
  // An elastic job (--min_workers, issue 35): where its coordinator listens
  // (cluster/membership_service.h). Every ring then forms from the coordinator's view of who is
  // in the job, and re-forms at each change; nullopt: the cluster's workers, all of them, always.
  std::optional<HostPort> coordinator;
  // An elastic worker's name when it is not its task's: a worker that joins a running job alone
  // (dtrain task --join) is the only worker of its own cluster, and "worker<--task_index>" in the
  // job.
  std::string member_name;
  // An elastic job's --elastic_batch global: each step takes the job's global batch (its --workers
  // × --batch_size examples), split over the workers there are; false: every worker takes
  // --batch_size, and the global batch follows their number.
  bool keep_global_batch = false;
};

// A default-constructed config, for the flags that show its defaults: one instance rather than a
// temporary per use.
const AllreduceClusterConfig& default_allreduce_cluster_config();

}  // namespace dtrain
