// Strategies `local` and `towers`: one process applies its own gradients. With K towers the
// GradientComputer averages K replicas' gradients; either way there is one update per step.
#pragma once

#include "train/gradient_computer.h"
#include "train/strategy.h"
#include "train/train_config.h"

namespace dtrain {

class LocalStrategy final : public Strategy {
 public:
  explicit LocalStrategy(const TrainConfig& config);

  WorkerPlace place() const override { return {}; }
  std::string describe() const override;
  // The newest checkpoint of --train_dir, else fresh parameters from --seed.
  int64_t start(TrainingState& state, const Restore& restore) override;
  // The update runs inside the computer's pass, chunk by chunk on its threads; plain SGD on one
  // tower is folded into backward itself (GradientComputer::sgd_step), except on a step that
  // must keep its gradient, whose gradient is written out and then applied.
  float step(TrainingState& state, GradientComputer& computer, const Batch& batch, float lr,
             int64_t local_step, bool keep_gradient) override;

 private:
  const TrainConfig& config_;
  // The step in progress, for the chunk updates below, which are built once so that a step
  // allocates nothing.
  TrainingState* state_ = nullptr;
  float lr_ = 0;
  int64_t at_ = 0;
  GradientComputer::ChunkUpdate update_;
  GradientComputer::ChunkUpdate average_update_;
};

}  // namespace dtrain
