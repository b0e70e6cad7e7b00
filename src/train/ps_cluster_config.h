// What a task of the ps strategies is given beyond the TrainConfig: the cluster and its secret,
// the placement of the shards, sync mode, and the waits and transports between tasks.
#pragma once

#include <cstddef>
#include <optional>
#include <set>
#include <string>

#include "cluster/cluster_spec.h"
#include "comm/transport.h"
#include "ps/partition.h"
#include "ps/ps_service_options.h"
#include "ps/sync_options.h"

namespace dtrain {

struct PsClusterConfig {
  ClusterConfig cluster;  // the whole cluster and this task
  std::string secret;     // the cluster secret, raw bytes
  Placement placement = Placement::kBalanced;
  size_t min_shard_bytes = 64 * 1024;
  // Shards longer than this travel as several frames, so push and pull overlap (ps/partition.h).
  // 512 KiB beat 1 MiB over TCP (1 MiB model, 1 ps x 1 worker: 3.9-4.2 against 2.5-2.6 GB/s) and
  // through memory (9.1-9.3 against 7.9-8.3), and 256 KiB (docs/benchmarks.md, Parameter servers).
  size_t max_shard_bytes = 512 << 10;
  // sync_replicas, replicas_to_aggregate, total_num_replicas; 0 counts mean all the workers.
  SyncOptions sync;
  // How long a task waits for its peers: connecting, the chief's initialisation, a sync step.
  int peer_timeout_ms = 600'000;
  // A worker's push and pull that waits longer than this on its ps tasks is reported
  // (--stall_warning; 0: never).
  int stall_warning_ms = 3000;
  // How often a task still waiting for a peer says so: whom, where, the last error, the time left.
  int wait_report_interval_ms = 10'000;
  // How long a ps waits for a lost worker to come back, and what a sync ps does when one does not
  // and too few are left for a step.
  int worker_timeout_ms = 60'000;
  // A peer whose host answers nothing, heartbeats included, for this long is lost (comm/
  // connection.h): workers then reconnect to a ps, and a ps counts the worker as gone.
  int liveness_timeout_ms = 10'000;
  WorkerLossPolicy on_worker_loss = WorkerLossPolicy::kStop;
  // Sync, an elastic job (--min_workers; 0: not elastic): PsServiceOptions::min_workers.
  int min_workers = 0;
  // Async: the ps tasks take workers that join the running job (dtrain task --join), up to this
  // many in all (--max_workers; 0 or --workers: none). Their workers are counted as they come and
  // go.
  int max_workers = 0;
  // A worker that joined a running async job: the identity ps0 handed it (-1: its task's), and
  // the job's --workers, by whose shards it takes its data (shard worker % workers).
  int joined_as = -1;
  int job_workers = 0;
  // How gradients and values travel between a worker and a ps of one host (--transport;
  // ps/ps_protocol.h): through memory or over TCP.
  Transport transport = Transport::kAuto;
  // A ps task's: the flags of ps_job_setting_flags() (train/ps_job_settings.h) its command line
  // gave, without their dashes. Set, and naming no model, the task takes what the job trains from
  // the chief, checking these against the chief's; nullopt (a task configured in-process, or
  // given a model), it serves its own settings and refuses workers with others.
  std::optional<std::set<std::string>> given_flags;
};

// The sync options with their defaults resolved against the cluster's training workers, checked
// (ps/sync_options.h).
// A default-constructed config, for the flags that show its defaults: one instance rather than a
// temporary per use.
const PsClusterConfig& default_ps_cluster_config();

SyncOptions resolve_sync(const PsClusterConfig& config);
// The partition every task of the cluster computes alike (ps/partition.h).
PartitionMap partition_for(const ParamSet& layout, const PsClusterConfig& config);

}  // namespace dtrain
