#include "train/loop_step.h"

#include <algorithm>
#include <chrono>

#include "train/fault_injection.h"

namespace dtrain {

GradientStep::GradientStep(GradientComputer& computer)
    : computer_(computer),
      update_([this](size_t begin, size_t end) { state_->apply(lr_, at_, begin, end); }),
      average_update_([this](size_t begin, size_t end) {
        state_->moving_average()->update(state_->params(), at_ + 1, begin, end);
      }) {}

float GradientStep::compute(TrainingState& state, const Batch& batch, StepContext& context) {
  Optimizer& optimizer = state.optimizer();
  if (!context.may_update || optimizer.clips())
    return computer_.compute(state.params(), batch, state.grads());
  state_ = &state;
  lr_ = context.lr;
  at_ = state.step;
  context.updated = true;
  if (optimizer.plain_sgd() && computer_.towers() == 1 && !context.keep_gradient) {
    return computer_.sgd_step(state.params(), batch, state.grads(), context.lr, nullptr,
                              state.moving_average() != nullptr ? &average_update_ : nullptr);
  }
  return computer_.compute(state.params(), batch, state.grads(), nullptr, &update_);
}

LoopStep::LoopStep(const TrainConfig& config, const StrategyTraits& traits, Strategy& strategy,
                   GradientComputer& computer, std::string prefix)
    : config_(config),
      update_in_compute_(traits.update_in_compute),
      strategy_(strategy),
      gradient_step_(computer),
      compute_(traits.compute != nullptr ? *traits.compute : gradient_step_),
      guard_(std::move(prefix)) {}

LoopStep::Done LoopStep::run(TrainingState& state, const Batch& batch, float lr, int64_t local_step,
                             bool keep_gradient) {
  using Clock = std::chrono::steady_clock;
  const auto& faults = config_.nonfinite_gradient_steps;
  const bool fault_due = std::find(faults.begin(), faults.end(), local_step) != faults.end();
  StepContext context{.lr = lr,
                      .examples = batch.size,
                      .local_step = local_step,
                      .keep_gradient = keep_gradient,
                      .may_update = update_in_compute_ && !fault_due,
                      .guard = &guard_};
  const auto began = Clock::now();
  Done done;
  done.loss = compute_.compute(state, batch, context);
  if (fault_due) inject_nonfinite_gradient(config_, local_step, state.grads());
  const auto computed = Clock::now();
  const StepReport report = strategy_.exchange_and_apply(state, context);
  done.phases = {.compute = std::chrono::duration<double>(computed - began).count(),
                 .communicate = report.communicate,
                 .apply = report.apply};
  return done;
}

}  // namespace dtrain
