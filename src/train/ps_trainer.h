// One task of a parameter-server cluster (strategies `async` and `sync`, DESIGN.md §3 and §5): a ps
// task serves its shards until every worker is done; a worker runs the training loop with the ps
// strategy (compute, then push-pull), the chief first initialising (or restoring) the variables
// and checkpointing as it goes.
#pragma once

#include <ostream>

#include "train/ps_cluster_config.h"
#include "train/task_strategy.h"
#include "train/train_config.h"
#include "train/training_state.h"

namespace dtrain {

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
