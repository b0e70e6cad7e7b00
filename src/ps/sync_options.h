// How a ps task aggregates gradients (DESIGN.md §5): async, or sync over R replicas a step.
#pragma once

namespace dtrain {

struct SyncOptions {
  bool sync_replicas = false;  // --sync_replicas: false is async, the tutorials' default
  // --total_num_replicas: the workers that push; worker ids are [0, total_num_replicas). 0: all
  // of the cluster's training workers, filled in by resolve_sync_options where their number is
  // known.
  int total_num_replicas = 0;
  // --replicas_to_aggregate R: gradients averaged into each sync step; 0 means total_num_replicas.
  int replicas_to_aggregate = 0;
};

// Throws UsageError naming the flag when the counts do not fit a cluster of `workers` training
// workers: --total_num_replicas other than 0 or the workers, --replicas_to_aggregate outside
// 0..workers.
void check_sync_options(const SyncOptions& sync, int workers);

// `sync` for a cluster of `workers` training workers, checked as above, with each 0 made all the
// workers.
SyncOptions resolve_sync_options(SyncOptions sync, int workers);

// R, the gradients a sync step averages: replicas_to_aggregate, or total_num_replicas for 0.
// Throws UsageError naming the flag where a step could never complete, or where
// total_num_replicas was not resolved.
int aggregate_count(const SyncOptions& sync);

}  // namespace dtrain
