// The table a run prints as it starts (STYLE.md 21, say what you run): the strategy, the model and
// its layers, the optimizer and schedule, the batch, the threads and kernels, the data, the
// evaluation and where the run saves.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "data/dataset.h"
#include "optim/lr_schedule.h"
#include "train/strategy.h"
#include "train/train_config.h"
#include "train/training_input.h"
#include "train/training_state.h"

namespace dtrain {

// What the table says, as the training loop knows it when the run starts.
struct RunTable {
  const TrainConfig& config;
  const Model& model;
  int64_t parameters = 0;
  std::string optimizer;
  std::string strategy;  // Strategy::describe()
  const TrainingInput& input;
  const LrSchedule& schedule;
  WorkerPlace place;
  int64_t steps_per_epoch = 0;  // global steps
  int64_t total_steps = 0;
  int64_t eval_every = 0;
  int64_t validation_examples = 0;
  std::string prefix;  // "worker=1: " for a worker of a cluster
};

void print_run_table(std::ostream& out, const RunTable& table);

}  // namespace dtrain
