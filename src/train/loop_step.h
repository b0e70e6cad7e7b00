// One training step as the loop runs it (DESIGN.md §2a): the compute — the strategy's own, or the
// loop's gradient computer — then the faults the run was told to make, then the strategy's
// exchange_and_apply; timed here, guarded against non-finite gradients by the guard kept here.
#pragma once

#include <string>

#include "train/gradient_computer.h"
#include "train/nonfinite_guard.h"
#include "train/step_compute.h"
#include "train/strategy.h"
#include "train/train_config.h"

namespace dtrain {

// The loop's compute: the gradient computer. Where the step may make the update (a strategy whose
// exchange is nothing), the update runs inside the computer's pass, chunk by chunk on its threads,
// and plain SGD on one tower is folded into backward itself (GradientComputer::sgd_step), except
// on a step that must keep its gradient; a clipped norm needs the whole gradient first, so it is
// left to exchange_and_apply.
class GradientStep final : public StepCompute {
 public:
  explicit GradientStep(GradientComputer& computer);
  float compute(TrainingState& state, const Batch& batch, StepContext& context) override;

 private:
  GradientComputer& computer_;
  // The step in progress, for the chunk updates below, which are built once so that a step
  // allocates nothing.
  TrainingState* state_ = nullptr;
  float lr_ = 0;
  int64_t at_ = 0;
  GradientComputer::ChunkUpdate update_;
  GradientComputer::ChunkUpdate average_update_;
};

class LoopStep {
 public:
  // REQUIRES: every argument outlives the LoopStep; traits are the strategy's.
  LoopStep(const TrainConfig& config, const StrategyTraits& traits, Strategy& strategy,
           GradientComputer& computer, std::string prefix);

  struct Done {
    float loss = 0;
    StepPhases phases;
  };
  // The step of this worker's `local_step` (from 1) on the batch at learning rate lr.
  Done run(TrainingState& state, const Batch& batch, float lr, int64_t local_step,
           bool keep_gradient);

  const NonFiniteGuard& guard() const { return guard_; }

 private:
  const TrainConfig& config_;
  const bool update_in_compute_;
  Strategy& strategy_;
  GradientStep gradient_step_;
  StepCompute& compute_;
  NonFiniteGuard guard_;
};

}  // namespace dtrain
