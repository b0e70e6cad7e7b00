// Faults a task can be told to make on purpose (--inject_nonfinite_at), so that tests exercise the
// paths that real numerical faults take without waiting for one.
#pragma once

#include <cstdint>

#include "nn/param_set.h"
#include "train/train_config.h"

namespace dtrain {

// Puts a NaN into grads when `local_step` (this task's step, from 1) is one the config names.
// Returns whether it did.
bool inject_nonfinite_gradient(const TrainConfig& config, int64_t local_step, GradSet& grads);

}  // namespace dtrain
