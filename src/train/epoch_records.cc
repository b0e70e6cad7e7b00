#include "train/epoch_records.h"

namespace dtrain {

EpochRecords::EpochRecords(int64_t steps_per_epoch, int batch_size, LoopOutputs& outputs,
                           RunSteering& steering)
    : steps_per_epoch_(steps_per_epoch),
      batch_size_(batch_size),
      outputs_(outputs),
      steering_(steering) {}

void EpochRecords::count_from(int64_t step) {
  if (steps_per_epoch_ > 0) recorded_ = step / steps_per_epoch_;
}

void EpochRecords::step_ended(const WorkerPlace& place, int64_t step, float loss,
                              double train_seconds) {
  loss_sum_ += loss;
  ++losses_;
  steering_.batch_ended(step, loss_sum_ / static_cast<double>(losses_));
  if (ended(place, step)) record(place, step, loss, train_seconds);
}

void EpochRecords::run_ended(const WorkerPlace& place, int64_t step, float loss,
                             double train_seconds) {
  if (ended(place, step)) record(place, step, loss, train_seconds);
}

void EpochRecords::stopped(const WorkerPlace& place, int64_t step, double train_seconds) {
  if (losses_ == 0) return;
  steering_.epoch_ended(step / steps_per_epoch_, step, loss_sum_ / losses_,
                        examples_per_second(place, train_seconds));
}

// An epoch of global steps has passed since the last record.
bool EpochRecords::ended(const WorkerPlace& place, int64_t step) const {
  if (!place.chief || (!outputs_.run_log().enabled() && !steering_.active()) ||
      steps_per_epoch_ <= 0)
    return false;
  return step / steps_per_epoch_ > recorded_;
}

// Async workers may carry the global step across more than one epoch during one of the chief's
// steps: each epoch gets its record, with what the chief saw since its last.
void EpochRecords::record(const WorkerPlace& place, int64_t step, float loss,
                          double train_seconds) {
  const double mean = losses_ > 0 ? loss_sum_ / losses_ : loss;
  const double rate = examples_per_second(place, train_seconds);
  while (recorded_ < step / steps_per_epoch_) {
    ++recorded_;
    outputs_.epoch_record(step, recorded_, mean, rate);
    steering_.epoch_ended(recorded_ - 1, step, mean, rate);
  }
  loss_sum_ = 0;
  losses_ = 0;
  seconds_at_record_ = train_seconds;
}

double EpochRecords::examples_per_second(const WorkerPlace& place, double train_seconds) const {
  const double s = train_seconds - seconds_at_record_;
  return s > 0 ? static_cast<double>(losses_) * batch_size_ * place.workers / s : 0.0;
}

}  // namespace dtrain
