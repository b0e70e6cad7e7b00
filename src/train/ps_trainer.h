// One task of a parameter-server cluster (strategies `async` and `sync`, DESIGN.md §3 and §5): a ps
// task serves its shards until every worker is done; a worker runs the training loop with the ps
// strategy (compute, then push-pull), the chief first initialising (or restoring) the variables
// and checkpointing as it goes.
#pragma once

#include <ostream>

#include "train/ps_cluster_config.h"
#include "train/train_config.h"

namespace dtrain {

// Runs the task config.cluster.task names. Returns the process exit code. Throws UsageError for
// inconsistent flags, TransportError when a peer is lost, Error otherwise.
int run_ps_task(const TrainConfig& train, const PsClusterConfig& config, std::ostream& out);

}  // namespace dtrain
