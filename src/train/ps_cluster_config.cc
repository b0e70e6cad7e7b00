// The ps cluster's sync options and partition, derived from its config.
#include "train/ps_cluster_config.h"

#include <fmt/format.h>

#include "base/error.h"

namespace dtrain {

void check_sync_options(const SyncOptions& sync, int workers) {
  if (sync.total_num_replicas != 0 && sync.total_num_replicas != workers) {
    throw UsageError(fmt::format(
        "--total_num_replicas {}: the cluster has {} training workers; give {} or leave it out",
        sync.total_num_replicas, workers, workers));
  }
  if (sync.replicas_to_aggregate < 0 || sync.replicas_to_aggregate > workers) {
    throw UsageError(fmt::format("--replicas_to_aggregate {}: must be in 1..{} (the workers)",
                                 sync.replicas_to_aggregate, workers));
  }
}

SyncOptions resolve_sync(const PsClusterConfig& config) {
  SyncOptions sync = config.sync;
  const int workers = static_cast<int>(training_workers(config.cluster.cluster).size());
  check_sync_options(sync, workers);
  if (sync.total_num_replicas == 0) sync.total_num_replicas = workers;
  if (sync.replicas_to_aggregate == 0) sync.replicas_to_aggregate = workers;
  return sync;
}

PartitionMap partition_for(const ParamSet& layout, const PsClusterConfig& config) {
  return make_partition(layout, static_cast<int>(config.cluster.cluster.tasks("ps").size()),
                        config.placement, config.min_shard_bytes, config.max_shard_bytes);
}

}  // namespace dtrain
