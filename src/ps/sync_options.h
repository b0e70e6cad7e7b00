// How a ps task aggregates gradients (DESIGN.md §5): async, or sync over R replicas a step.
#pragma once

namespace dtrain {

struct SyncOptions {
  bool sync_replicas = false;  // --sync_replicas: false is async, the tutorials' default
  // --total_num_replicas: the workers that push; worker ids are [0, total_num_replicas).
  int total_num_replicas = 1;
  // --replicas_to_aggregate R: gradients averaged into each sync step; 0 means total_num_replicas.
  int replicas_to_aggregate = 0;
};

// R, the gradients a sync step averages: replicas_to_aggregate, or total_num_replicas for 0.
// Throws UsageError naming the flag where a step could never complete.
int aggregate_count(const SyncOptions& sync);

}  // namespace dtrain
