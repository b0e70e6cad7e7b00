// Strategies `local` and `towers`: one process applies its own gradients. With K towers the
// GradientComputer averages K replicas' gradients; either way there is one update per step, which
// the loop's compute makes as the gradients come (no exchange stands between them).
#pragma once

#include "train/strategy.h"
#include "train/train_config.h"

namespace dtrain {

class LocalStrategy final : public Strategy {
 public:
  explicit LocalStrategy(const TrainConfig& config);

  WorkerPlace place() const override { return {}; }
  StrategyTraits traits(int batch_size) const override;
  // The newest checkpoint of --train_dir, else fresh parameters from --seed.
  int64_t start(TrainingState& state, const Restore& restore) override;
  // The update the compute did not make: a clipped norm's, which needs the whole gradient.
  StepReport exchange_and_apply(TrainingState& state, const StepContext& context) override;

 private:
  const TrainConfig& config_;
};

}  // namespace dtrain
