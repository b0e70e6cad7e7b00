// The ps cluster's sync options and partition, derived from its config.
#include "train/ps_cluster_config.h"

namespace dtrain {

const PsClusterConfig& default_ps_cluster_config() {
  static const PsClusterConfig defaults;
  return defaults;
}

SyncOptions resolve_sync(const PsClusterConfig& config) {
  return resolve_sync_options(config.sync,
                              static_cast<int>(training_workers(config.cluster.cluster).size()));
}

PartitionMap partition_for(const ParamSet& layout, const PsClusterConfig& config) {
  return make_partition(layout, static_cast<int>(config.cluster.cluster.tasks("ps").size()),
                        config.placement, config.min_shard_bytes, config.max_shard_bytes);
}

}  // namespace dtrain
