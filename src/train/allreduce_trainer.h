// One worker of an all-reduce cluster as a process (strategy `allreduce`, DESIGN.md §2 and §6):
// the strategy (train/allreduce_strategy.h) over a ring formed over TCP.
#pragma once

#include <ostream>

#include "train/allreduce_strategy.h"
#include "train/task_strategy.h"
#include "train/train_config.h"
#include "train/training_input.h"
#include "train/training_state.h"

namespace dtrain {

// Checks the cluster before anything is loaded: a secret, no ps tasks, this task a worker. Throws
// UsageError naming what is wrong.
void begin_allreduce_task(const AllreduceClusterConfig& config);

// The strategy of the worker config.cluster.task names, over state and input, printing its
// start-up line, step lines and, at the end, its test accuracy, training time and the CRC32C of
// its parameters; whoever holds it keeps train, config, state, input and out alive. Its abort tells
// the other workers, so they stop at once instead of after the timeout.
// REQUIRES: begin_allreduce_task(config) passed; every worker of the cluster started with the same
// training flags (those that differ are refused by the ring's fingerprint).
TaskStrategy make_allreduce_strategy(const TrainConfig& train, const AllreduceClusterConfig& config,
                                     TrainingState& state, const TrainingInput& input,
                                     std::ostream& out);

}  // namespace dtrain
