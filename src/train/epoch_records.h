// The chief's epoch records (Keras's history: one entry per epoch, whose epoch_loss is the mean
// of this worker's losses over the epoch's steps), and the owner's epoch_ended callbacks.
#pragma once

#include <cstdint>

#include "train/loop_outputs.h"
#include "train/run_steering.h"
#include "train/strategy.h"

namespace dtrain {

class EpochRecords {
 public:
  // REQUIRES: outputs and steering outlive this.
  EpochRecords(int64_t steps_per_epoch, int batch_size, LoopOutputs& outputs,
               RunSteering& steering);

  // Whole epochs count from global step `step`: the run's first, or the one a membership change
  // made this worker the chief at.
  void count_from(int64_t step);
  // A step ended at global step `step` with the batch's loss; train_seconds: all training so far.
  // Records every epoch that passed, where this worker is the chief.
  void step_ended(const WorkerPlace& place, int64_t step, float loss, double train_seconds);
  // The run ended at `step`: the epoch the other async workers may have ended after the chief's
  // last step.
  void run_ended(const WorkerPlace& place, int64_t step, float loss, double train_seconds);
  // The owner's stop ends the epoch under way, as Keras's fit ends the epoch a callback stopped
  // in: its callbacks hear of that end.
  void stopped(const WorkerPlace& place, int64_t step, double train_seconds);

 private:
  bool ended(const WorkerPlace& place, int64_t step) const;
  void record(const WorkerPlace& place, int64_t step, float loss, double train_seconds);
  double examples_per_second(const WorkerPlace& place, double train_seconds) const;

  const int64_t steps_per_epoch_;
  const int batch_size_;
  LoopOutputs& outputs_;
  RunSteering& steering_;
  int64_t recorded_ = 0;  // whole epochs of global steps
  double loss_sum_ = 0;   // since the last record
  int64_t losses_ = 0;
  double seconds_at_record_ = 0;
};

}  // namespace dtrain
