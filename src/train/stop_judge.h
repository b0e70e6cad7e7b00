// Where a run's stopping is judged (DESIGN.md §2a), in one place: the chief's evaluation of the
// validation set, the target accuracy, early stopping's patience and the best weights it keeps
// (in memory, and in train_dir/best/), and the strategy's agreement that makes the chief's verdict
// every worker's, so that all leave the loop at the same step where the strategy needs that.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "ckpt/checkpoint_manager.h"
#include "data/dataset.h"
#include "metrics/run_log.h"
#include "train/gradient_computer.h"
#include "train/run_steering.h"
#include "train/strategy.h"
#include "train/train_config.h"
#include "train/training_state.h"

namespace dtrain {

class StopJudge {
 public:
  // REQUIRES: every argument outlives this; run_log is the chief's.
  StopJudge(const TrainConfig& config, const Dataset& validation, TrainingState& state,
            Strategy& strategy, GradientComputer& computer, RunSteering& steering, RunLog& run_log,
            std::ostream& out);

  // The chief's train_dir/best/ (with --train_dir and --early_stopping_patience), or no longer.
  void open_best();
  void close_best() { best_checkpoints_.reset(); }

  // Where the run stands at an evaluation.
  struct Moment {
    const WorkerPlace& place;
    int64_t steps_per_epoch = 0;
    double train_seconds = 0;
    float loss = 0;  // of the last batch
  };
  // The chief evaluates the validation set (the others' turn comes at the end, on the test set)
  // and judges the target and the patience; the strategy makes the verdict everyone's. Returns
  // whether the run stops here; sets seconds_to_target where it stops at its target.
  bool evaluate(const Moment& moment, std::optional<double>& seconds_to_target);

  // Keras's restore_best_weights: the test set judges the weights the validation set chose.
  // Does nothing where no evaluation improved.
  void restore_best(const std::string& prefix);

 private:
  StopVerdict judge(const GradientComputer::Evaluation& v);
  void record(const Moment& moment, const GradientComputer::Evaluation& v);
  void keep_best(double loss);

  const TrainConfig& c_;
  const Dataset& validation_;
  TrainingState& state_;
  Strategy& strategy_;
  GradientComputer& computer_;
  RunSteering& steering_;
  RunLog& run_log_;
  std::ostream& out_;
  std::optional<CheckpointManager> best_checkpoints_;
  // Early stopping: the weights of the lowest validation loss so far, on every worker that hears
  // of it (the chief; under all-reduce, every replica).
  struct Best {
    int64_t step = 0;
    double loss = 0;
    Checkpoint state;
  };
  std::optional<Best> best_;
  int64_t evaluations_since_best_ = 0;  // the chief's count
};

}  // namespace dtrain
