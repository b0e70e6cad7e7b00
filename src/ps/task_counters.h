// A ps task's counters: its shards' summed, as its closing line, its done replies and its
// Prometheus series report them.
#pragma once

#include "ps/push_result.h"
#include "ps/shard_store.h"

namespace dtrain {

// applied, stale_dropped, duplicates and rejected summed over the shards the task holds; step is
// the reported step (its first shard's, 0 with none).
ShardCounters task_counters(const ShardStore& store);

}  // namespace dtrain
