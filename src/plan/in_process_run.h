// A run plan run in this process on data already in memory: what Python's fit runs. Local and
// towers train as `dtrain train` does; the cluster strategies run their tasks as threads — the
// all-reduce workers over a MemoryRing, the ps tasks and their workers over loopback connections
// with the real handshake and protocol (by reference through memory where --transport allows) —
// each worker running the one training loop with the strategy `dtrain task` would run.
#pragma once

#include <ostream>

#include "ckpt/checkpoint.h"
#include "data/dataset.h"
#include "plan/run_plan.h"
#include "train/train_config.h"

namespace dtrain {

// The validation set may be empty (no evaluation but at the end, on the test set).
struct InMemoryData {
  Dataset train, validation, test;
};

struct InProcessResult {
  TrainResult result;  // the chief's
  // The chief's training state at the end: parameters, optimizer slots (a ps worker's are as the
  // ps tasks left them: the workers pull parameters only), global step, and the recorded config.
  Checkpoint state;
};

// Runs plan.strategy with plan.flags.workers workers (and plan.flags.ps ps tasks) on `data`, which
// every worker reads in place. The chief prints to out; the other tasks' lines are dropped unless
// they fail, when the first failure is rethrown with what that task printed. plan.config.stop
// stops every task at a step boundary (the result's halt_signal says so). Throws UsageError for
// flags that mean nothing here (the data files, a cluster's own flags) or out of range, before
// anything starts. plan.config.owner, where set, hears the chief's step boundaries, and its orders
// (a learning rate, a stop) reach every worker at the same global step (train/run_control.h).
InProcessResult run_plan_in_process(const RunPlan& plan, const InMemoryData& data,
                                    std::ostream& out);

}  // namespace dtrain
