// One run's training state in one place: the model, its parameter and gradient arenas, the
// optimizer with its slots, the moving average and the global step. Every strategy trains one, and
// a checkpoint saves and restores it whole, so that a resumed run continues where it stopped.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string_view>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_manager.h"
#include "nn/model.h"
#include "nn/param_set.h"
#include "optim/moving_average.h"
#include "optim/optimizer.h"
#include "train/train_config.h"

namespace dtrain {

class TrainingState {
 public:
  // Builds the model and zero-filled arenas from config (initialize() draws the values). Throws
  // UsageError for an unknown model or optimizer.
  explicit TrainingState(const TrainConfig& config);
  TrainingState(const TrainingState&) = delete;
  TrainingState& operator=(const TrainingState&) = delete;

  const Model& model() const { return *model_; }
  ParamSet& params() { return params_; }
  const ParamSet& params() const { return params_; }
  GradSet& grads() { return grads_; }
  Optimizer& optimizer() { return *optimizer_; }
  // Null when the run keeps no moving average.
  MovingAverage* moving_average() { return moving_average_ ? &*moving_average_ : nullptr; }
  // What evaluation reads: the moving average where the run evaluates on it, else the parameters.
  const ParamSet& eval_params() const;

  // Fresh parameters drawn from seed; the moving average restarts from them.
  void initialize(uint64_t seed);
  // One update of the arena range [begin, end) at learning rate lr, counting `step` updates
  // before it: the optimizer, then the moving average of the new values while they are in cache.
  void apply(float lr, int64_t step, size_t begin, size_t end);
  // Views of the tensors a checkpoint holds: parameters first, then the optimizer slots and the
  // moving average. The gradients are not part of it.
  std::vector<TensorRef> tensors() const;
  // Copies the checkpoint's tensors into the state (not its step). Parameters and optimizer slots
  // must all be present with matching shapes (CheckpointError naming the tensor otherwise); a
  // checkpoint without a moving average restarts the average from the restored parameters.
  void restore(const Checkpoint& checkpoint);
  // The checkpoint's parameters alone (a run that goes on from them with another optimizer): the
  // optimizer slots keep their values, the moving average restarts from the parameters.
  void restore_parameters(const Checkpoint& checkpoint);
  // A copy of the state as a checkpoint of a run with these settings would hold it.
  Checkpoint snapshot(const TrainConfig& config) const;

  int64_t step = 0;  // the global step: updates applied to the parameters this state follows

 private:
  std::unique_ptr<Model> model_;
  ParamSet params_;
  GradSet grads_;
  std::unique_ptr<Optimizer> optimizer_;
  std::optional<MovingAverage> moving_average_;
  bool eval_moving_average_ = false;
};

// Restores `state` from the newest valid checkpoint `checkpoints` holds, telling `out` which ones
// it skipped and which it restored (each line opened by "<who>: " unless who is empty). Returns
// the checkpoint's global step, or nullopt when there is none; state.step is left to the caller.
// Throws CheckpointError if the checkpoint holds a model other than state's.
std::optional<int64_t> restore_newest(const CheckpointManager& checkpoints, TrainingState& state,
                                      std::string_view who, std::ostream& out);

}  // namespace dtrain
