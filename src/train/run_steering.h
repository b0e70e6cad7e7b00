// The training loop's side of a RunControl (train/run_control.h): on the chief, the events its
// owner hears and the orders it posts before each step; on every other worker, the orders it
// takes. Inactive (every call a no-op) without a control.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "optim/lr_schedule.h"
#include "train/run_control.h"

namespace dtrain {

class RunSteering {
 public:
  // `weights`: the chief's state as a checkpoint holds it, for the owner's callbacks.
  // steps_per_epoch: global steps; REQUIRES: > 0 where control is set.
  RunSteering(RunControl* control, bool chief, int64_t steps_per_epoch, const LrSchedule& schedule,
              RunWeights weights);
  ~RunSteering() { end(); }
  RunSteering(const RunSteering&) = delete;
  RunSteering& operator=(const RunSteering&) = delete;

  bool active() const { return control_ != nullptr; }

  // Before global step `step`: the chief tells its owner of the run's start, the epoch's and the
  // batch's, and posts the orders; any other worker takes the orders in force. True: the run
  // stops here, before the step, as at its last.
  bool stops_before(int64_t step);
  // The learning rate of global step `step`: the owner's, once it set one; else the schedule's.
  float rate_at(int64_t step) const { return rate_ ? *rate_ : schedule_.at(step); }
  // The chief, after the step that brought the global step to `step`: that batch's end, with the
  // mean loss of the epoch's batches so far.
  void batch_ended(int64_t step, double epoch_loss);
  // The chief's loop has left its steps: it closes the control, so that no worker waits for a post
  // that will not come while the chief finishes (the destructor does it on a failure).
  void end();
  // The chief evaluated the validation set at global step `step`.
  void validated(int64_t step, double accuracy, double loss);
  // The chief, at the end of epoch `epoch` (from 0), at global step `step`, with its mean loss and
  // its training throughput.
  void epoch_ended(int64_t epoch, int64_t step, double loss, double examples_per_second);

 private:
  void tell(RunEvent event);

  RunControl* control_;
  const bool chief_;
  const int64_t steps_per_epoch_;
  const LrSchedule& schedule_;
  const RunWeights weights_;
  bool wants_batches_ = false;
  bool began_ = false;
  int64_t epoch_ = -1;  // the epoch whose beginning the owner heard of last
  std::optional<float> rate_;
  bool stop_ = false;
  bool ended_ = false;
  // The chief's last validation: its step, accuracy and loss.
  std::optional<std::pair<int64_t, std::pair<double, double>>> validation_;
};

}  // namespace dtrain
