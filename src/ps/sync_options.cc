// The check of the sync options.
#include "ps/sync_options.h"

#include <fmt/format.h>

#include "base/error.h"

namespace dtrain {

int aggregate_count(const SyncOptions& sync) {
  if (sync.total_num_replicas < 1) {
    throw UsageError(
        fmt::format("--total_num_replicas {}: need at least one worker", sync.total_num_replicas));
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
