// The local strategies' step: the update is the compute's (train/loop_step.h), unless it clips.
#include "train/local_strategy.h"

#include <fmt/format.h>

namespace dtrain {

LocalStrategy::LocalStrategy(const TrainConfig& config) : config_(config) {}

StrategyTraits LocalStrategy::traits(int batch_size) const {
  return {.description =
              config_.towers > 1 ? fmt::format("towers ({} towers)", config_.towers) : "local",
          .largest_batch = batch_size,
          .update_in_compute = true};
}

int64_t LocalStrategy::start(TrainingState& state, const Restore& restore) {
  state.initialize(config_.seed);
  if (const auto step = restore()) state.step = *step;
  return state.step;
}

StepReport LocalStrategy::exchange_and_apply(TrainingState& state, const StepContext& context) {
  if (!context.updated) {
    // A clipped norm needs the whole gradient, summed over the towers, before any update.
    state.optimizer().clip(state.grads());
    state.apply(context.lr, state.step, 0, state.params().flat().size());
  }
  ++state.step;
  return {};
}

}  // namespace dtrain
