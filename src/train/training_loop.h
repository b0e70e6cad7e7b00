// The one training loop (DESIGN.md §2) that every strategy runs: batches of this worker's share of
// the data → a step (train/loop_step.h: compute, then Strategy::exchange_and_apply) → step lines,
// the run log, evaluation, the target accuracy, early stopping and checkpoints at their cadence,
// then the closing lines. What differs between local, towers, async ps, sync ps and all-reduce is
// behind the Strategy (train/strategy.h).
#pragma once

#include <cstdint>
#include <ostream>

#include "train/strategy.h"
#include "train/train_config.h"
#include "train/training_input.h"
#include "train/training_state.h"

namespace dtrain {

// Trains state on this worker's share of the input's training data (the strategy's place says
// which). Periodic evaluation of the validation set (with the target accuracy and early stopping
// it judges), the run log and checkpoints are the chief's; every worker evaluates the test set
// once, at the end (with early stopping, on the best weights it heard of). Throws UsageError when
// evaluation is due and the input holds no validation set. Throws DataError when the data does not
// fit the model (naming both), Error when the loss diverges, and whatever the strategy throws.
// REQUIRES: validate_train_config(config) passed.
TrainResult run_training_loop(const TrainConfig& config, const TrainingInput& input,
                              TrainingState& state, Strategy& strategy, std::ostream& out);

}  // namespace dtrain
