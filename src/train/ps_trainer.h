// One task of a parameter-server cluster (strategies `async` and `sync`, DESIGN.md §3 and §5): a ps
// task serves its shards until every worker is done; a worker runs the training loop with the ps
// strategy (compute, then push-pull), the chief first initialising (or restoring) the variables
// and checkpointing as it goes.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>

#include "cluster/cluster_spec.h"
#include "comm/peer_memory.h"
#include "ps/partition.h"
#include "ps/ps_service.h"
#include "ps/shard_store.h"
#include "train/task_strategy.h"
#include "train/train_config.h"
#include "train/training_state.h"

namespace dtrain {

struct PsClusterConfig {
  ClusterConfig cluster;  // the whole cluster and this task
  std::string secret;     // the cluster secret, raw bytes
  Placement placement = Placement::kBalanced;
  size_t min_shard_bytes = 64 * 1024;
  // Shards longer than this travel as several frames, so push and pull overlap (ps/partition.h).
  size_t max_shard_bytes = 1 << 20;
  // sync_replicas, replicas_to_aggregate; total_num_replicas 0 means the number of workers.
  SyncOptions sync;
  // How long a task waits for its peers: connecting, the chief's initialisation, a sync step.
  int peer_timeout_ms = 600'000;
  // How often a task still waiting for a peer says so: whom, where, the last error, the time left.
  int wait_report_interval_ms = 10'000;
  // How long a ps waits for a lost worker to come back, and what a sync ps does when one does not
  // and too few are left for a step.
  int worker_timeout_ms = 60'000;
  // A peer whose host answers nothing, heartbeats included, for this long is lost (comm/
  // connection.h): workers then reconnect to a ps, and a ps counts the worker as gone.
  int liveness_timeout_ms = 10'000;
  WorkerLossPolicy on_worker_loss = WorkerLossPolicy::kStop;
  // How gradients and values travel between a worker and a ps of one host (--transport;
  // ps/ps_protocol.h): through memory or over TCP.
  Transport transport = Transport::kAuto;
};

// Throws UsageError naming the flag when the sync counts do not fit a cluster of this many
// training workers: --total_num_replicas other than the workers, --replicas_to_aggregate outside
// 0..workers (0: all of them).
void check_sync_options(const SyncOptions& sync, int workers);

// Checks what every task of a ps cluster needs (a secret, at least one ps task) before anything
// is loaded, and sets this process up for one. Returns whether config.cluster.task is a ps task.
// Throws UsageError naming what is wrong, a task that does not train among them.
bool begin_ps_task(const PsClusterConfig& config);

// A ps task (config.cluster.task is "ps"): serves its shards until every worker is done, and
// returns the process exit code. REQUIRES: begin_ps_task(config) passed.
int run_ps_service(const TrainConfig& train, const PsClusterConfig& config, std::ostream& out);

// The strategy of the worker config.cluster.task names, over state, printing to out; whoever
// holds it keeps train, config, state and out alive. Its abort tells the ps tasks that this worker
// failed. REQUIRES: begin_ps_task(config) returned false.
TaskStrategy make_ps_worker_strategy(const TrainConfig& train, const PsClusterConfig& config,
                                     TrainingState& state, std::ostream& out);

}  // namespace dtrain
