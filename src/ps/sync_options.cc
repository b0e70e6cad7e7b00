// The checks of the sync options, and their defaults resolved against a cluster.
#include "ps/sync_options.h"

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

SyncOptions resolve_sync_options(SyncOptions sync, int workers) {
  check_sync_options(sync, workers);
  if (sync.total_num_replicas == 0) sync.total_num_replicas = workers;
  if (sync.replicas_to_aggregate == 0) sync.replicas_to_aggregate = workers;
  return sync;
}

int aggregate_count(const SyncOptions& sync) {
  if (sync.total_num_replicas < 1) {
    throw UsageError(fmt::format(
        "--total_num_replicas {}: need at least one worker{}", sync.total_num_replicas,
        sync.total_num_replicas == 0 ? " (0, all of them, is resolved against the cluster first)"
                                     : ""));
  }
  const int r =
      sync.replicas_to_aggregate == 0 ? sync.total_num_replicas : sync.replicas_to_aggregate;
  if (r < 1 || r > sync.total_num_replicas) {
    throw UsageError(fmt::format(
        "--replicas_to_aggregate {}: must be between 1 and --total_num_replicas {}, or a step "
        "could never complete",
        sync.replicas_to_aggregate, sync.total_num_replicas));
  }
  return r;
}

}  // namespace dtrain
