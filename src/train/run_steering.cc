// Keras's order of events: train begin, then per epoch its begin, each batch's begin and end,
// and the epoch's end (after its validation).
#include "train/run_steering.h"

#include <utility>

namespace dtrain {

RunSteering::RunSteering(RunControl* control, bool chief, int64_t steps_per_epoch,
                         const LrSchedule& schedule, RunWeights weights)
    : control_(control),
      chief_(chief),
      steps_per_epoch_(steps_per_epoch),
      schedule_(schedule),
      weights_(std::move(weights)) {
  if (control_ != nullptr) wants_batches_ = control_->owner().wants_batches();
}

void RunSteering::end() {
  if (control_ == nullptr || !chief_ || ended_) return;
  ended_ = true;
  control_->close();
}

bool RunSteering::stops_before(int64_t step) {
  if (control_ == nullptr) return false;
  const int64_t epoch = step / steps_per_epoch_;
  if (!chief_) {
    // The chief's orders change only at its events: every step with batch events, else where an
    // epoch (or the run) begins.
    const bool may_change = !began_ || wants_batches_ || step % steps_per_epoch_ == 0;
    began_ = true;
    if (!control_->lockstep() || may_change) {
      const RunOrders orders = control_->orders_at(step);
      if (orders.learning_rate) rate_ = orders.learning_rate;
      stop_ = orders.stop;
    }
    return stop_;
  }
  if (!began_) {
    began_ = true;
    tell({.kind = RunEvent::Kind::kTrainBegin, .epoch = epoch, .step = step});
  }
  if (!stop_ && epoch != epoch_) {
    epoch_ = epoch;
    tell({.kind = RunEvent::Kind::kEpochBegin, .epoch = epoch, .step = step});
  }
  if (!stop_ && wants_batches_) {
    tell({.kind = RunEvent::Kind::kBatchBegin,
          .epoch = epoch,
          .batch = step % steps_per_epoch_,
          .step = step});
  }
  control_->post(step, {.learning_rate = rate_, .stop = stop_});
  return stop_;
}

void RunSteering::batch_ended(int64_t step, double epoch_loss) {
  if (control_ == nullptr || !chief_ || !wants_batches_ || stop_) return;
  // The batch that brought the global step to `step` was step - 1.
  tell({.kind = RunEvent::Kind::kBatchEnd,
        .epoch = (step - 1) / steps_per_epoch_,
        .batch = (step - 1) % steps_per_epoch_,
        .step = step,
        .logs = {{"loss", epoch_loss}}});
}

void RunSteering::validated(int64_t step, double accuracy, double loss) {
  validation_ = {step, {accuracy, loss}};
}

void RunSteering::epoch_ended(int64_t epoch, int64_t step, double loss,
                              double examples_per_second) {
  if (control_ == nullptr || !chief_) return;
  RunEvent event{.kind = RunEvent::Kind::kEpochEnd,
                 .epoch = epoch,
                 .step = step,
                 .examples_per_second = examples_per_second};
  event.logs = {{"loss", loss}};
  if (validation_ && validation_->first == step) {
    event.logs.emplace_back("val_loss", validation_->second.second);
    event.logs.emplace_back("val_accuracy", validation_->second.first);
  }
  tell(std::move(event));
}

void RunSteering::tell(RunEvent event) {
  event.learning_rate = rate_at(event.step);
  const RunOrders orders = control_->owner().on_event(event, weights_);
  if (orders.learning_rate) rate_ = orders.learning_rate;
  stop_ = stop_ || orders.stop;
}

}  // namespace dtrain
