// The local strategies' step: gradients and update in one pass of the computer's threads.
#include "train/local_strategy.h"

#include <fmt/format.h>

namespace dtrain {

LocalStrategy::LocalStrategy(const TrainConfig& config)
    : config_(config),
      update_([this](size_t begin, size_t end) { state_->apply(lr_, at_, begin, end); }),
      average_update_([this](size_t begin, size_t end) {
        state_->moving_average()->update(state_->params(), at_ + 1, begin, end);
      }) {}

std::string LocalStrategy::describe() const {
  return config_.towers > 1 ? fmt::format("towers ({} towers)", config_.towers) : "local";
}

int64_t LocalStrategy::start(TrainingState& state, const Restore& restore) {
  state.initialize(config_.seed);
  if (const auto step = restore()) state.step = *step;
  return state.step;
}

float LocalStrategy::step(TrainingState& state, GradientComputer& computer, const Batch& batch,
                          float lr, int64_t /*local_step*/, bool keep_gradient) {
  state_ = &state;
  lr_ = lr;
  at_ = state.step;
  Optimizer& optimizer = state.optimizer();
  if (optimizer.clips()) {
    // A clipped norm needs the whole gradient, summed over the towers, before any update.
    const float loss = computer.compute(state.params(), batch, state.grads());
    optimizer.clip(state.grads());
    state.apply(lr, at_, 0, state.params().flat().size());
    state.step = at_ + 1;
    return loss;
  }
  const float loss =
      optimizer.plain_sgd() && computer.towers() == 1 && !keep_gradient
          ? computer.sgd_step(state.params(), batch, state.grads(), lr, nullptr,
                              state.moving_average() != nullptr ? &average_update_ : nullptr)
          : computer.compute(state.params(), batch, state.grads(), nullptr, &update_);
  state.step = at_ + 1;
  return loss;
}

}  // namespace dtrain
