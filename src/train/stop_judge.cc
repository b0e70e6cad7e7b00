#include "train/stop_judge.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "train/run_report.h"

namespace dtrain {

StopJudge::StopJudge(const TrainConfig& config, const Dataset& validation, TrainingState& state,
                     Strategy& strategy, GradientComputer& computer, RunSteering& steering,
                     RunLog& run_log, std::ostream& out)
    : c_(config),
      validation_(validation),
      state_(state),
      strategy_(strategy),
      computer_(computer),
      steering_(steering),
      run_log_(run_log),
      out_(out) {}

void StopJudge::open_best() {
  if (!c_.train_dir.empty() && c_.early_stopping_patience > 0)
    best_checkpoints_.emplace(c_.train_dir / "best", 1);
}

// Not training time.
bool StopJudge::evaluate(const Moment& moment, std::optional<double>& seconds_to_target) {
  StopVerdict verdict;
  if (moment.place.chief) {
    const GradientComputer::Evaluation v =
        computer_.evaluate(state_.eval_params(), validation_.rows().data(),
                           validation_.labels.data(), validation_.size);
    record(moment, v);
    verdict = judge(v);
  }
  if (!c_.target_accuracy && c_.early_stopping_patience == 0) return false;
  verdict = strategy_.agree_to_stop(verdict);
  if (verdict.improved) keep_best(verdict.loss);
  if (!verdict.stop) return false;
  const std::string prefix = line_prefix(moment.place);
  if (verdict.early) {
    fmt::print(
        out_, "{}early stopping at step {}: no lower validation loss in {} evaluations{}\n", prefix,
        state_.step, c_.early_stopping_patience,
        best_ ? fmt::format(" (the lowest, {:.4f}, at step {})", best_->loss, best_->step) : "");
  } else {
    seconds_to_target = moment.train_seconds;
    fmt::print(out_,
               "{}target accuracy {} reached at step {}: validation accuracy = {:.4f} after "
               "{:.3f} s of training\n",
               prefix, *c_.target_accuracy, state_.step, verdict.accuracy, moment.train_seconds);
  }
  out_ << std::flush;
  return true;
}

// The chief's verdict on an evaluation; the target comes first.
StopVerdict StopJudge::judge(const GradientComputer::Evaluation& v) {
  StopVerdict verdict{.accuracy = v.accuracy, .loss = v.loss};
  if (c_.target_accuracy && v.accuracy >= *c_.target_accuracy) verdict.stop = true;
  if (c_.early_stopping_patience == 0) return verdict;
  if (!best_ || v.loss < best_->loss) {
    verdict.improved = true;
    evaluations_since_best_ = 0;
  } else if (++evaluations_since_best_ >= c_.early_stopping_patience && !verdict.stop) {
    verdict.stop = verdict.early = true;
  }
  return verdict;
}

void StopJudge::record(const Moment& moment, const GradientComputer::Evaluation& v) {
  const double epoch = static_cast<double>(state_.step) / moment.steps_per_epoch;
  fmt::print(out_,
             "{}step {}, epoch {:.2f}, validation accuracy = {:.4f}, validation loss = {:.4f} "
             "({:.3f} s of training)\n",
             line_prefix(moment.place), state_.step, epoch, v.accuracy, v.loss,
             moment.train_seconds);
  out_ << std::flush;
  run_log_.write({state_.step,
                  {{"epoch", epoch},
                   {"train_seconds", moment.train_seconds},
                   {"loss", moment.loss},
                   {"validation/accuracy", v.accuracy},
                   {"validation/loss", v.loss},
                   {"learning_rate", steering_.rate_at(state_.step)}}});
  steering_.validated(state_.step, v.accuracy, v.loss);
}

// These weights have the lowest validation loss so far: kept in memory for the closing test
// evaluation and, by the chief with a --train_dir, in train_dir/best/ (the checkpoint code's
// atomic write, the one file replacing the last).
void StopJudge::keep_best(double loss) {
  if (best_checkpoints_) strategy_.before_checkpoint(state_);
  Checkpoint copy = state_.snapshot(c_);
  if (best_checkpoints_) {
    best_checkpoints_->save({copy.global_step, copy.model, copy.optimizer, copy.config},
                            state_.tensors());
  }
  best_.emplace(Best{state_.step, loss, std::move(copy)});
}

void StopJudge::restore_best(const std::string& prefix) {
  if (!best_) return;
  state_.restore(best_->state);
  fmt::print(
      out_,
      "{}restored the weights of step {}, the lowest validation loss ({:.4f}), for the "
      "test evaluation{}\n",
      prefix, best_->step, best_->loss,
      best_checkpoints_ ? fmt::format("; saved in {}", best_checkpoints_->dir().string()) : "");
  out_ << std::flush;
}

}  // namespace dtrain
