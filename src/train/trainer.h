// The single-process strategies (`local` and `towers`) in one call, for tests and tools that hold a
// TrainConfig: the CLI's runs go through the composition root (plan/run.h) instead.
#pragma once

#include <ostream>

#include "train/train_config.h"

namespace dtrain {

// Trains as config says, printing step lines and the closing lines to out. Resumes from the newest
// valid checkpoint in config.train_dir when there is one.
// REQUIRES: validate_train_config(config) passed (plan/run_plan.h).
TrainResult train_local(const TrainConfig& config, std::ostream& out);

}  // namespace dtrain
