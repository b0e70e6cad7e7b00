#include "ps/task_counters.h"

namespace dtrain {

ShardCounters task_counters(const ShardStore& store) {
  ShardCounters total;
  for (size_t shard : store.shards()) {
    const ShardCounters c = store.counters(shard);
    total.applied += c.applied;
    total.stale_dropped += c.stale_dropped;
    total.duplicates += c.duplicates;
    total.rejected += c.rejected;
  }
  total.step = store.reported_step();
  return total;
}

}  // namespace dtrain
