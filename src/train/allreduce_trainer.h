// One worker of an all-reduce cluster as a process (strategy `allreduce`, DESIGN.md §2 and §6):
// the strategy (train/allreduce_strategy.h) over a ring formed over TCP.
#pragma once

#include <ostream>

#include "train/allreduce_strategy.h"
#include "train/train_config.h"

namespace dtrain {

// Runs the worker config.cluster.task names, printing its start-up line, step lines and, at the
// end, its test accuracy, training time and the CRC32C of its parameters. Returns the process exit
// code. Throws UsageError for inconsistent flags or a task that does not train, CollectiveError
// when the ring fails (naming the worker at fault), Error otherwise; a worker that fails tells the
// others before it throws, so they stop at once instead of after the timeout.
// REQUIRES: train.train_steps or train.epochs set as for train_local; every worker of the cluster
// started with the same training flags (those that differ are refused by the ring's fingerprint).
int run_allreduce_task(const TrainConfig& train, const AllreduceClusterConfig& config,
                       std::ostream& out);

}  // namespace dtrain
