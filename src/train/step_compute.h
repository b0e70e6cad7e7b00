// The step's seam (DESIGN.md §2a): a step is `compute` — a StepCompute writes the batch's
// gradients — then the strategy's exchange_and_apply, which makes them new parameters. The loop
// runs the two, and alone injects faults between them, guards against non-finite gradients
// (train/nonfinite_guard.h) and times them (train/loop_step.h).
#pragma once

#include <cstdint>

#include "data/batcher.h"
#include "train/training_state.h"

namespace dtrain {

class NonFiniteGuard;

// What the loop hands the two halves of a step.
struct StepContext {
  float lr = 0;
  int examples = 0;        // in this worker's batch
  int64_t local_step = 0;  // this worker's steps, from 1
  // state.grads() must hold the step's gradient afterwards, as this worker's update used it
  // (averaged over the batch, the towers and, under all-reduce, the workers), for the run log's
  // histograms.
  bool keep_gradient = false;
  // The compute may make the update itself, chunk by chunk as the gradients come (a strategy
  // whose exchange is nothing: StrategyTraits::update_in_compute, on a step that keeps no
  // gradient and injects no fault).
  bool may_update = false;
  // Set by the compute: it made the update; exchange_and_apply only advances the step.
  bool updated = false;
  NonFiniteGuard* guard = nullptr;  // the loop's, for exchange_and_apply
};

// Computes a step's gradients: the loop's gradient computer by default (train/loop_step.h); a
// strategy whose step computes otherwise (a pipeline's stage) supplies its own.
class StepCompute {
 public:
  virtual ~StepCompute() = default;
  // Writes the gradient of the mean loss over the batch at the state's parameters into
  // state.grads() and returns that loss; where context.may_update, it may also make the update,
  // and then sets context.updated.
  virtual float compute(TrainingState& state, const Batch& batch, StepContext& context) = 0;
};

// What exchange_and_apply reports of the step, for the metrics endpoint (dtrain_step_seconds by
// phase): exchanging the gradients (all-reduce; push and pull), and the optimizer's update where
// this worker makes it. A negative time: not a phase of this strategy.
struct StepReport {
  double communicate = -1;
  double apply = -1;
};

}  // namespace dtrain
