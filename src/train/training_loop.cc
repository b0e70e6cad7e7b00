// The training loop. Training time is measured around the steps only: evaluation, the run log and
// checkpoint writes are excluded, so time-to-accuracy compares like with like.
#include "train/training_loop.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <chrono>
#include <cmath>
#include <optional>
#include <thread>

#include "base/error.h"
#include "metrics/log_cadence.h"
#include "metrics/progress_bar.h"
#include "optim/lr_schedule.h"
#include "tensor/blas.h"
#include "train/epoch_records.h"
#include "train/loop_checkpoints.h"
#include "train/loop_outputs.h"
#include "train/loop_step.h"
#include "train/run_report.h"
#include "train/run_steering.h"
#include "train/run_table.h"
#include "train/stop_judge.h"

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

class TrainingLoop {
 public:
  TrainingLoop(const TrainConfig& config, const TrainingInput& input, TrainingState& state,
               Strategy& strategy, std::ostream& out)
      : c_(config),
        input_(input),
        test_(input.test()),
        state_(state),
        strategy_(strategy),
        out_(out),
        place_(strategy.place()),
        batches_(input.batches(place_, config.batch_size, config.seed, config.shuffle)),
        traits_(strategy.traits(config.batch_size)),
        computer_(state.model(), config.towers, traits_.largest_batch,
                  threads_per_tower(config.threads, config.towers)),
        step_(config, traits_, strategy, computer_, line_prefix(place_)),
        steps_per_epoch_(batches_->steps_per_epoch() * traits_.steps_per_batch),
        total_steps_(total_global_steps(config, steps_per_epoch_)),
        eval_every_(eval_interval(config, steps_per_epoch_)),
        schedule_(lr_schedule_of(config, steps_per_epoch_, total_steps_)),
        steering_(config.control, place_.chief, steps_per_epoch_, schedule_,
                  [this] {
                    strategy_.before_checkpoint(state_);
                    return state_.snapshot(c_);
                  }),
        outputs_(config, place_, strategy, out),
        checkpoints_(config, state, strategy, out),
        judge_(config, input.validation(), state, strategy, computer_, steering_,
               outputs_.run_log(), out),
        epochs_(steps_per_epoch_, config.batch_size, outputs_, steering_) {
    input.check_fits(state.model());
    computer_.set_precision(config.precision, Precision::kFp32);
    if (eval_every_ > 0 && input.validation().size == 0) {
      throw UsageError(fmt::format(
          "{}: periodic evaluation judges the validation examples held out of the training data, "
          "and there are none ({}); hold some out with --validation_size N",
          config.eval_every > 0 ? "--eval_every" : "--target_accuracy", input.describe()));
    }
    if (place_.chief) {
      checkpoints_.open();
      judge_.open_best();
    }
  }

  TrainResult run() {
    if (place_.chief) print_config();
    const int64_t first_step =
        strategy_.start(state_, [this] { return checkpoints_.restore(who()); });
    follow_place_change();
    if (first_step >= total_steps_) {
      fmt::print(out_,
                 "{}already finished at step {} (this run ends at step {}): nothing to train; a "
                 "larger --train_steps or --epochs goes on, --overwrite starts afresh\n",
                 prefix(), first_step, total_steps_);
    }
    batches_->seek(first_step / traits_.steps_per_batch);
    count_cadences_from(first_step);
    step_at_last_log_ = first_step;
    log_cadence_.emplace(log_every(), c_.log_secs, Clock::now());
    outputs_.start(first_step, traits_.description);

    ProgressBar bar(out_, total_steps_, c_.progress_bar && place_.chief);
    bar.update(first_step, 0);
    bool stopped_at_target = false;
    while (state_.step < total_steps_ && !strategy_.finished()) {
      if (steering_.stops_before(state_.step)) {
        stopped_at_target = true;  // the owner's stop ends the run as its target would
        epochs_.stopped(place_, state_.step, seconds(train_time_));
        break;
      }
      train_one_step();
      const StepBoundary boundary =
          strategy_.after_step(c_.stop != nullptr ? c_.stop->signal() : 0);
      result_.halt_signal = boundary.halt_signal;
      left_job_ = boundary.left_job;
      // The boundary where a membership view formed has no evaluation: a worker that joins there
      // starts after it, and every member must call the same collectives.
      if (boundary.place_changed) follow_place_change();
      outputs_.worker_counts(boundary.worker_counts);
      if (result_.halt_signal != 0) break;
      outputs_.histograms_if_due(state_);
      if (log_cadence_->due(place_.distributed ? local_steps_ : state_.step, Clock::now())) {
        bar.clear();
        log_step();
      }
      bar.update(state_.step, loss_);
      if (eval_due() && !boundary.place_changed) {
        bar.clear();
        if (judge_.evaluate({.place = place_,
                             .steps_per_epoch = steps_per_epoch_,
                             .train_seconds = seconds(train_time_),
                             .loss = loss_},
                            result_.seconds_to_target)) {
          stopped_at_target = true;
          break;
        }
      }
      epochs_.step_ended(place_, state_.step, loss_, seconds(train_time_));
      checkpoints_.save_if_due();
    }
    bar.finish();
    steering_.end();
    return finish(first_step, stopped_at_target);
  }

 private:
  void print_config() {
    print_run_table(out_, {.config = c_,
                           .model = state_.model(),
                           .parameters = state_.params().num_values(),
                           .optimizer = state_.optimizer().name(),
                           .strategy = traits_.description,
                           .input = input_,
                           .schedule = schedule_,
                           .place = place_,
                           .steps_per_epoch = steps_per_epoch_,
                           .total_steps = total_steps_,
                           .eval_every = eval_every_,
                           .validation_examples = input_.validation().size,
                           .prefix = prefix()});
  }

  std::string prefix() const { return line_prefix(place_); }
  // How restore lines name this process.
  std::string who() const {
    return place_.distributed ? fmt::format("worker{}", place_.name_index()) : std::string();
  }

  void train_one_step() {
    if (c_.step_delay_ms > 0)  // a deliberate straggler (--step_delay_ms), not synchronisation
      std::this_thread::sleep_for(std::chrono::milliseconds(c_.step_delay_ms));
    const auto start = Clock::now();
    if (const std::optional<DataSlice> slice = strategy_.data_slice())
      batches_->reslice(slice->index, slice->count, slice->at, slice->global_batch);
    epoch_ = batches_->epoch();
    const Batch& batch = batches_->next();
    input_.check_labels(batch, state_.model());
    // Dropout's draws depend on (seed, step, worker) alone: a resumed run draws what an unbroken
    // one would have.
    computer_.set_step_seed(step_seed(c_.seed, state_.step, place_.rank));
    const float lr = steering_.rate_at(state_.step);
    // Local steps advance the global step by one; a ps step may advance it by more, but its
    // gradient is always kept.
    const bool keep_gradient = outputs_.histograms_due_after(state_.step);
    const int64_t step_before = state_.step;
    const LoopStep::Done done = step_.run(state_, batch, lr, local_steps_ + 1, keep_gradient);
    loss_ = done.loss;
    const auto elapsed = Clock::now() - start;
    outputs_.step(state_,
                  {.batch = batch,
                   .epoch = epoch_,
                   .local_step = local_steps_ + 1,
                   .advanced_one = state_.step == step_before + 1,
                   .loss = loss_,
                   .seconds = seconds(elapsed),
                   .phases = done.phases},
                  input_.feature_count());
    train_time_ += elapsed;
    interval_time_ += elapsed;
    ++interval_steps_;
    ++local_steps_;
    if (!std::isfinite(loss_)) {
      throw Error(fmt::format(
          "{}loss is {} at global step {}: training diverged; lower --learning_rate (now {})",
          prefix(), loss_, state_.step, c_.learning_rate));
    }
  }

  // Step lines come every --log_every steps, at least once an epoch (a short run on a small data
  // set says its loss too), or every --log_secs seconds, whichever is first. A local run counts
  // global steps (a resumed run keeps its rhythm); a worker its own steps.
  int64_t log_every() const {
    if (c_.log_every <= 0) return 0;
    const int64_t epoch = place_.distributed ? batches_->steps_per_epoch() : steps_per_epoch_;
    return epoch > 0 ? std::min(c_.log_every, epoch) : c_.log_every;
  }

  void log_step() {
    outputs_.step_line({.step = state_.step,
                        .epoch = epoch_,
                        .local_steps = local_steps_,
                        .loss = loss_,
                        .seconds = seconds(interval_time_),
                        .steps = interval_steps_,
                        .global_steps = state_.step - step_at_last_log_,
                        .learning_rate = steering_.rate_at(state_.step)});
    interval_time_ = {};
    interval_steps_ = 0;
    step_at_last_log_ = state_.step;
  }

  // The cadences of global steps count from `step`: the run's first, or the one a membership
  // change made this worker the chief at.
  void count_cadences_from(int64_t step) {
    if (eval_every_ > 0) next_eval_ = next_multiple(step, eval_every_);
    epochs_.count_from(step);
    checkpoints_.count_from(step);
    outputs_.count_histograms_from(step);
  }

  // A membership change moved this worker: its rank (which slice of the data it takes, see
  // data_slice) and perhaps the chief's duties, which it takes on from here.
  void follow_place_change() {
    const bool was_chief = place_.chief;
    place_ = strategy_.place();
    if (was_chief && !place_.chief) {  // a restarted chief that rejoined a running job
      checkpoints_.close();
      judge_.close_best();
      outputs_.close_chief();
    }
    if (place_.chief && !was_chief) {
      checkpoints_.open();
      judge_.open_best();
      outputs_.open_chief();
      count_cadences_from(state_.step);
    }
  }

  bool eval_due() {
    if (eval_every_ <= 0 || state_.step < next_eval_) return false;
    next_eval_ = next_multiple(state_.step, eval_every_);
    return true;
  }

  TrainResult finish(int64_t first_step, bool stopped_at_target) {
    const bool reached_end =
        stopped_at_target || state_.step >= total_steps_ || strategy_.finished();
    // The state as the strategy leaves it is what the last checkpoint holds and what the closing
    // evaluation reads, so `dtrain eval` of that checkpoint reports the same accuracy.
    strategy_.finish(state_, reached_end);
    // The other async workers may have ended the last epoch after the chief's last step.
    if (reached_end) epochs_.run_ended(place_, state_.step, loss_, seconds(train_time_));
    checkpoints_.write_last();
    result_.global_step = state_.step;
    result_.steps_run = local_steps_;
    result_.train_seconds = seconds(train_time_);
    result_.final_loss = loss_;
    const RunEnd end{.place = place_,
                     .result = &result_,
                     .first_step = reached_end ? first_step : 0,
                     .local_steps = local_steps_,
                     .batch_size = c_.batch_size,
                     .target_accuracy = c_.target_accuracy,
                     .warnings = {}};
    if (!reached_end && result_.halt_signal != 0) {
      // Stopped by a signal: what was kept, and what a restart resumes from. No evaluation: a
      // stopping task has its scheduler's grace period and no more.
      outputs_.close();
      print_stopped_line(out_, end, left_job_, checkpoints_.dir());
      if (left_job_) result_.halt_signal = 0;  // a clean leave, not a failure
      return result_;
    }
    result_.examples_per_second =
        result_.train_seconds > 0 ? local_steps_ * c_.batch_size / result_.train_seconds : 0;
    judge_.restore_best(prefix());
    result_.test_accuracy = computer_.accuracy(state_.eval_params(), test_.rows().data(),
                                               test_.labels.data(), test_.size);
    outputs_.final_record(state_.step, result_.train_seconds, result_.test_accuracy);
    outputs_.close();
    RunEnd closing = end;
    if (place_.chief)
      closing.warnings = state_.model().statistics_warnings(state_.eval_params(), state_.step);
    print_closing_lines(out_, strategy_, closing);
    return result_;
  }

  const TrainConfig& c_;
  const TrainingInput& input_;
  const Dataset& test_;
  TrainingState& state_;
  Strategy& strategy_;
  std::ostream& out_;
  WorkerPlace place_;  // follows the membership of an elastic job
  std::unique_ptr<BatchSource> batches_;
  const StrategyTraits traits_;
  GradientComputer computer_;
  LoopStep step_;                  // after computer_, which it runs
  const int64_t steps_per_epoch_;  // global steps
  const int64_t total_steps_;
  const int64_t eval_every_;
  const LrSchedule schedule_;
  RunSteering steering_;  // the owner's orders (Python's callbacks), where it has one
  LoopOutputs outputs_;
  LoopCheckpoints checkpoints_;  // the chief's, with --train_dir
  StopJudge judge_;
  EpochRecords epochs_;

  int64_t step_at_last_log_ = 0;
  std::optional<LogCadence> log_cadence_;  // from the first step
  TrainResult result_;
  bool left_job_ = false;  // the halt is this worker's leave of a job that goes on
  int64_t local_steps_ = 0;
  int64_t epoch_ = 0;  // of the last batch
  float loss_ = 0;
  int64_t next_eval_ = 0;
  Clock::duration train_time_{};
  Clock::duration interval_time_{};
  int64_t interval_steps_ = 0;
};

}  // namespace

TrainResult run_training_loop(const TrainConfig& config, const TrainingInput& input,
                              TrainingState& state, Strategy& strategy, std::ostream& out) {
  blas_set_threads(1);  // the computer's teams split the products; see GradientComputer
  TrainingLoop loop(config, input, state, strategy, out);
  return loop.run();
}

}  // namespace dtrain
