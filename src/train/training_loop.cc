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
#include "ckpt/checkpoint_manager.h"
#include "metrics/log_cadence.h"
#include "metrics/progress_bar.h"
#include "metrics/run_log.h"
#include "metrics/tensorboard_sink.h"
#include "optim/lr_schedule.h"
#include "tensor/blas.h"
#include "train/examples_record.h"
#include "train/histogram_snapshots.h"
#include "train/loop_metrics.h"
#include "train/loop_step.h"
#include "train/run_report.h"
#include "train/run_steering.h"
#include "train/run_table.h"

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The first multiple of `every` above `step`: when a cadence of `every` global steps next falls
// due. Async ps workers see the global step jump by several at once, so cadences are crossings
// of multiples rather than equalities.
int64_t next_multiple(int64_t step, int64_t every) { return (step / every + 1) * every; }

class TrainingLoop {
 public:
  TrainingLoop(const TrainConfig& config, const TrainingInput& input, TrainingState& state,
               Strategy& strategy, std::ostream& out)
      : c_(config),
        input_(input),
        validation_(input.validation()),
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
        steering_(config.control, place_.chief, steps_per_epoch_, schedule_, [this] {
          strategy_.before_checkpoint(state_);
          return state_.snapshot(c_);
        }) {
    input.check_fits(state.model());
    computer_.set_precision(config.precision, Precision::kFp32);
    if (eval_every_ > 0 && validation_.size == 0) {
      throw UsageError(fmt::format(
          "{}: periodic evaluation judges the validation examples held out of the training data, "
          "and there are none ({}); hold some out with --validation_size N",
          config.eval_every > 0 ? "--eval_every" : "--target_accuracy", input.describe()));
    }
    if (place_.chief) open_chief_outputs();
    open_worker_event_file();
    open_examples_record();
    open_metrics_endpoint();
  }

  TrainResult run() {
    if (place_.chief) print_config();
    const int64_t first_step = strategy_.start(state_, [this] { return restore(); });
    follow_place_change();
    if (first_step >= total_steps_) {
      fmt::print(out_,
                 "{}already finished at step {} (this run ends at step {}): nothing to train; a "
                 "larger --train_steps or --epochs goes on, --overwrite starts afresh\n",
                 prefix(), first_step, total_steps_);
    }
    batches_->seek(first_step / traits_.steps_per_batch);
    if (eval_every_ > 0) next_eval_ = next_multiple(first_step, eval_every_);
    if (steps_per_epoch_ > 0) epochs_recorded_ = first_step / steps_per_epoch_;
    if (c_.save_steps > 0) next_save_ = next_multiple(first_step, c_.save_steps);
    if (histograms_) next_histograms_ = next_multiple(first_step, c_.summary_steps);
    last_save_ = Clock::now();
    step_at_last_log_ = first_step;
    log_cadence_.emplace(log_every(), c_.log_secs, Clock::now());
    write_start_records(first_step);

    ProgressBar bar(out_, total_steps_, c_.progress_bar && place_.chief);
    bar.update(first_step, 0);
    bool stopped_at_target = false;
    while (state_.step < total_steps_ && !strategy_.finished()) {
      if (steering_.stops_before(state_.step)) {
        stopped_at_target = true;  // the owner's stop ends the run as its target would
        // As Keras's fit ends the epoch a callback stopped in: its callbacks hear of that end.
        if (epoch_loss_steps_ > 0) {
          steering_.epoch_ended(state_.step / steps_per_epoch_, state_.step,
                                epoch_loss_sum_ / epoch_loss_steps_, epoch_examples_per_second());
        }
        break;
      }
      train_one_step();
      StepBoundary boundary = strategy_.after_step(c_.stop != nullptr ? c_.stop->signal() : 0);
      result_.halt_signal = boundary.halt_signal;
      left_job_ = boundary.left_job;
      // The boundary where a membership view formed has no evaluation: a worker that joins there
      // starts after it, and every member must call the same collectives.
      const bool moved = boundary.place_changed;
      if (moved) follow_place_change();
      write_worker_counts(boundary.worker_counts);
      if (result_.halt_signal != 0) break;
      if (histograms_due()) write_histograms();
      if (log_due()) {
        bar.clear();
        log_step();
      }
      bar.update(state_.step, loss_);
      if (eval_due() && !moved) {
        bar.clear();
        if (evaluate_and_agree_to_stop()) {
          stopped_at_target = true;
          break;
        }
      }
      epoch_loss_sum_ += loss_;
      ++epoch_loss_steps_;
      steering_.batch_ended(state_.step, epoch_loss_sum_ / static_cast<double>(epoch_loss_steps_));
      if (epoch_ended()) write_epoch_record();
      if (save_due()) save();
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
                           .validation_examples = validation_.size,
                           .prefix = prefix()});
  }

  std::string prefix() const { return line_prefix(place_); }
  // How restore lines name this process.
  std::string who() const {
    return place_.distributed ? fmt::format("worker{}", place_.name_index()) : std::string();
  }

  std::optional<int64_t> restore() {
    if (checkpoints_) {
      const auto step = restore_newest(*checkpoints_, state_, who(), out_);
      out_ << std::flush;
      if (step) return step;
    }
    if (c_.initial_state == nullptr) return std::nullopt;
    // Slots belong to the optimizer that filled them: another one starts its own afresh.
    if (c_.initial_state->optimizer == state_.optimizer().name()) {
      state_.restore(*c_.initial_state);
    } else {
      state_.restore_parameters(*c_.initial_state);
    }
    return 0;
  }

  // Every membership change, at the step it took effect at, besides every step line's count.
  void write_worker_counts(const std::vector<std::pair<int64_t, double>>& counts) {
    for (const auto& [step, workers] : counts) {
      if (place_.chief && run_log_.enabled()) run_log_.write({step, {{"workers", workers}}});
      if (training_metrics_) training_metrics_->workers(static_cast<int>(workers));
    }
  }

  void train_one_step() {
    if (c_.step_delay_ms > 0)  // a deliberate straggler (--step_delay_ms), not synchronisation
      std::this_thread::sleep_for(std::chrono::milliseconds(c_.step_delay_ms));
    const auto start = Clock::now();
    if (const std::optional<DataSlice> slice = strategy_.data_slice())
      batches_->reslice(slice->index, slice->count, slice->at, slice->global_batch);
    epoch_ = batches_->epoch();
    const Batch& batch = batches_->next();
    check_labels(batch);
    // Dropout's draws depend on (seed, step, worker) alone: a resumed run draws what an unbroken
    // one would have.
    computer_.set_step_seed(step_seed(c_.seed, state_.step, place_.rank));
    const float lr = steering_.rate_at(state_.step);
    // Local steps advance the global step by one; a ps step may advance it by more, but its
    // gradient is always kept.
    const bool keep_gradient = histograms_ && state_.step + 1 >= next_histograms_;
    const int64_t step_before = state_.step;
    const LoopStep::Done done = step_.run(state_, batch, lr, local_steps_ + 1, keep_gradient);
    loss_ = done.loss;
    if (state_.step == step_before + 1)
      examples_record_.write(state_.step, epoch_, batch, input_.feature_count());
    const auto elapsed = Clock::now() - start;
    if (training_metrics_) {
      training_metrics_->step(state_.step, local_steps_ + 1, batch.size, loss_, seconds(elapsed));
      training_metrics_->phases(done.phases.compute, done.phases.communicate, done.phases.apply);
    }
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

  // --metrics_port: served from here on, for the run's whole length; the chief's run log feeds
  // its live page.
  void open_metrics_endpoint() {
    if (c_.metrics_port < 0) return;
    metrics_ = std::make_unique<LoopMetrics>(c_, place_, strategy_, out_, prefix());
    training_metrics_ = &metrics_->training();
    if (place_.chief) run_log_.add_sink(metrics_->board_sink());
  }

  void open_examples_record() {
    if (!c_.record_examples.empty())
      examples_record_ =
          ExamplesRecord(c_.record_examples, place_.distributed, place_.name_index());
  }

  // Streamed labels are first seen here; one beyond the model's outputs would index past its
  // logits.
  void check_labels(const Batch& batch) const {
    const int32_t classes = state_.model().num_classes();
    for (int i = 0; i < batch.size; ++i) {
      if (batch.labels[i] < 0 || batch.labels[i] >= classes) {
        throw DataError(fmt::format("a training example has label {} ({}), but model {} takes {}",
                                    batch.labels[i], input_.describe(), state_.model().name(),
                                    state_.model().label_rule()));
      }
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

  bool log_due() {
    return log_cadence_->due(place_.distributed ? local_steps_ : state_.step, Clock::now());
  }

  void log_step() {
    const double s = seconds(interval_time_);
    const double examples_per_second = s > 0 ? interval_steps_ * c_.batch_size / s : 0.0;
    const double steps_per_second = s > 0 ? (state_.step - step_at_last_log_) / s : 0.0;
    if (place_.distributed) {
      fmt::print(out_,
                 "worker={}, epoch={}, global_step={}, local_step={}, loss={:.4f} ({:.1f} "
                 "examples/sec)\n",
                 place_.name_index(), epoch_, state_.step, local_steps_, loss_,
                 examples_per_second);
    } else {
      fmt::print(out_, "step {}, loss = {:.4f} ({:.1f} examples/sec; {:.4f} sec/batch)\n",
                 state_.step, loss_, examples_per_second,
                 interval_steps_ > 0 ? s / interval_steps_ : 0.0);
    }
    LogExtras extras = strategy_.log_extras();
    for (const std::string& line : extras.lines) fmt::print(out_, "{}{}\n", prefix(), line);
    out_ << std::flush;
    interval_time_ = {};
    interval_steps_ = 0;
    step_at_last_log_ = state_.step;
    if (place_.chief && run_log_.enabled()) {
      RunRecord record{state_.step,
                       {{"loss", loss_},
                        {"learning_rate", steering_.rate_at(state_.step)},
                        {"examples_per_sec", examples_per_second},
                        {"steps_per_sec", steps_per_second}}};
      for (auto& scalar : extras.scalars) record.scalars.push_back(std::move(scalar));
      run_log_.write(record);
    }
    worker_log_.write({state_.step, {{"loss", loss_}, {"examples_per_sec", examples_per_second}}});
  }

  // The chief checkpoints and writes the run log: from the start, or from the membership change
  // that made it the chief (an elastic job whose chief left). Its events go to the log folder.
  void open_chief_outputs() {
    if (!c_.train_dir.empty()) {
      checkpoints_.emplace(c_.train_dir, c_.keep_checkpoints);
      if (c_.early_stopping_patience > 0) best_checkpoints_.emplace(c_.train_dir / "best", 1);
      run_log_.add_sink(std::make_unique<JsonLinesSink>(c_.train_dir / "metrics.jsonl"));
    }
    if (c_.observer != nullptr) run_log_.add_sink(std::make_unique<ForwardingSink>(*c_.observer));
    if (const std::filesystem::path dir = log_dir(); !dir.empty()) {
      run_log_.add_sink(std::make_unique<TensorBoardSink>(dir));
      histograms_ = c_.summary_steps > 0;
    }
  }

  // Each worker's events (the chief's too) go to worker_<rank>/ in the log folder, so that
  // TensorBoard shows one run per worker beside the run's own.
  void open_worker_event_file() {
    const std::filesystem::path dir = log_dir();
    if (dir.empty() || !place_.distributed) return;
    worker_log_.add_sink(
        std::make_unique<TensorBoardSink>(dir / fmt::format("worker_{}", place_.name_index())));
  }

  std::filesystem::path log_dir() const { return c_.logdir.empty() ? c_.train_dir : c_.logdir; }

  // A membership change moved this worker: its rank (which slice of the data it takes, see
  // data_slice) and perhaps the chief's duties, which it takes on from here.
  void follow_place_change() {
    const bool was_chief = place_.chief;
    place_ = strategy_.place();
    if (was_chief && !place_.chief) {  // a restarted chief that rejoined a running job
      checkpoints_.reset();
      best_checkpoints_.reset();
      run_log_.close();
      histograms_ = false;
    }
    if (place_.chief && !was_chief) {
      open_chief_outputs();
      if (eval_every_ > 0) next_eval_ = next_multiple(state_.step, eval_every_);
      if (c_.save_steps > 0) next_save_ = next_multiple(state_.step, c_.save_steps);
      if (steps_per_epoch_ > 0) epochs_recorded_ = state_.step / steps_per_epoch_;
    }
  }

  // A resumed run says so first, so that TensorBoard drops what the interrupted one logged after
  // the checkpoint; the chief then records the run's configuration.
  void write_start_records(int64_t first_step) {
    const bool resumed = first_step > 0;
    if (resumed) worker_log_.write({.step = first_step, .resumed = true});
    if (!place_.chief) return;
    std::string config;
    const std::string settings = train_config_json(c_).dump(2);
    for (std::string_view rest = settings; !rest.empty();) {
      const size_t end = rest.find('\n');
      config += fmt::format("    {}\n", rest.substr(0, end));  // a Markdown code block
      rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    }
    run_log_.write({.step = first_step,
                    .texts = {{"config", fmt::format("dtrain train, strategy {}:\n\n{}",
                                                     traits_.description, config)}},
                    .start = true,
                    .resumed = resumed});
  }

  bool histograms_due() {
    if (!histograms_ || state_.step < next_histograms_) return false;
    next_histograms_ = next_multiple(state_.step, c_.summary_steps);
    return true;
  }

  void write_histograms() {
    run_log_.write({.step = state_.step,
                    .histograms = histograms_taken_.take(state_.params(), state_.grads())});
  }

  // An epoch of global steps has passed since the last epoch record: the chief's record of it
  // (Keras's epoch_loss: the mean of this worker's losses over the epoch's steps).
  bool epoch_ended() const {
    if (!place_.chief || (!run_log_.enabled() && !steering_.active()) || steps_per_epoch_ <= 0)
      return false;
    return state_.step / steps_per_epoch_ > epochs_recorded_;
  }

  // Async workers may carry the global step across more than one epoch during one of the
  // chief's steps: each epoch gets its record (Keras's history has one entry per epoch), with
  // what the chief saw since its last.
  void write_epoch_record() {
    const double loss = epoch_loss_steps_ > 0 ? epoch_loss_sum_ / epoch_loss_steps_ : loss_;
    const double examples_per_second = epoch_examples_per_second();
    while (epochs_recorded_ < state_.step / steps_per_epoch_) {
      ++epochs_recorded_;
      run_log_.write({state_.step,
                      {{"epoch_loss", loss},
                       {"epochs", static_cast<double>(epochs_recorded_)},
                       {"epoch_examples_per_sec", examples_per_second}}});
      steering_.epoch_ended(epochs_recorded_ - 1, state_.step, loss, examples_per_second);
    }
    epoch_loss_sum_ = 0;
    epoch_loss_steps_ = 0;
    train_time_at_epoch_ = train_time_;
  }

  double epoch_examples_per_second() const {
    const double s = seconds(train_time_ - train_time_at_epoch_);
    return s > 0 ? static_cast<double>(epoch_loss_steps_) * c_.batch_size * place_.workers / s
                 : 0.0;
  }

  bool eval_due() {
    if (eval_every_ <= 0 || state_.step < next_eval_) return false;
    next_eval_ = next_multiple(state_.step, eval_every_);
    return true;
  }

  bool save_due() {
    if (!checkpoints_) return false;
    bool due = false;
    if (c_.save_steps > 0 && state_.step >= next_save_) {
      next_save_ = next_multiple(state_.step, c_.save_steps);
      due = true;
    }
    if (c_.save_secs > 0 && seconds(Clock::now() - last_save_) >= c_.save_secs) due = true;
    return due;
  }

  // The test set, once, at the end.
  double evaluate() {
    return computer_.accuracy(state_.eval_params(), test_.rows().data(), test_.labels.data(),
                              test_.size);
  }

  // The chief evaluates the validation set (the others' turn comes at the end, on the test set)
  // and judges the target and the patience; the strategy makes its verdict everyone's, so that
  // every worker leaves the loop at the same step where the strategy needs that. Not training
  // time.
  bool evaluate_and_agree_to_stop() {
    StopVerdict verdict;
    if (place_.chief) {
      const GradientComputer::Evaluation v =
          computer_.evaluate(state_.eval_params(), validation_.rows().data(),
                             validation_.labels.data(), validation_.size);
      record_eval(v);
      verdict = judge(v);
    }
    if (!c_.target_accuracy && c_.early_stopping_patience == 0) return false;
    verdict = strategy_.agree_to_stop(verdict);
    if (verdict.improved) keep_best(verdict.loss);
    if (!verdict.stop) return false;
    if (verdict.early) {
      fmt::print(
          out_, "{}early stopping at step {}: no lower validation loss in {} evaluations{}\n",
          prefix(), state_.step, c_.early_stopping_patience,
          best_ ? fmt::format(" (the lowest, {:.4f}, at step {})", best_->loss, best_->step) : "");
    } else {
      result_.seconds_to_target = seconds(train_time_);
      fmt::print(out_,
                 "{}target accuracy {} reached at step {}: validation accuracy = {:.4f} after "
                 "{:.3f} s of training\n",
                 prefix(), *c_.target_accuracy, state_.step, verdict.accuracy,
                 seconds(train_time_));
    }
    out_ << std::flush;
    return true;
  }

  // The chief's verdict on an evaluation; the target comes first.
  StopVerdict judge(const GradientComputer::Evaluation& v) {
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

  void record_eval(const GradientComputer::Evaluation& v) {
    const double epoch = static_cast<double>(state_.step) / steps_per_epoch_;
    fmt::print(out_,
               "{}step {}, epoch {:.2f}, validation accuracy = {:.4f}, validation loss = {:.4f} "
               "({:.3f} s of training)\n",
               prefix(), state_.step, epoch, v.accuracy, v.loss, seconds(train_time_));
    out_ << std::flush;
    run_log_.write({state_.step,
                    {{"epoch", epoch},
                     {"train_seconds", seconds(train_time_)},
                     {"loss", loss_},
                     {"validation/accuracy", v.accuracy},
                     {"validation/loss", v.loss},
                     {"learning_rate", steering_.rate_at(state_.step)}}});
    steering_.validated(state_.step, v.accuracy, v.loss);
  }

  // These weights have the lowest validation loss so far: kept in memory for the closing test
  // evaluation and, by the chief with a --train_dir, in train_dir/best/ (the checkpoint code's
  // atomic write, the one file replacing the last).
  void keep_best(double loss) {
    if (best_checkpoints_) strategy_.before_checkpoint(state_);
    Checkpoint copy = state_.snapshot(c_);
    if (best_checkpoints_) {
      best_checkpoints_->save({copy.global_step, copy.model, copy.optimizer, copy.config},
                              state_.tensors());
    }
    best_.emplace(Best{state_.step, loss, std::move(copy)});
  }

  // Keras's restore_best_weights: the test set judges the weights the validation set chose.
  void restore_best() {
    state_.restore(best_->state);
    fmt::print(
        out_,
        "{}restored the weights of step {}, the lowest validation loss ({:.4f}), for the "
        "test evaluation{}\n",
        prefix(), best_->step, best_->loss,
        best_checkpoints_ ? fmt::format("; saved in {}", best_checkpoints_->dir().string()) : "");
    out_ << std::flush;
  }

  void save() {
    strategy_.before_checkpoint(state_);
    write_checkpoint();
  }

  void write_checkpoint() {
    const CheckpointInfo info{state_.step, state_.model().name(), state_.optimizer().name(),
                              train_config_json(c_)};
    checkpoints_->save(info, state_.tensors());
    last_save_ = Clock::now();
  }

  TrainResult finish(int64_t first_step, bool stopped_at_target) {
    const bool reached_end =
        stopped_at_target || state_.step >= total_steps_ || strategy_.finished();
    // The state as the strategy leaves it is what the last checkpoint holds and what the closing
    // evaluation reads, so `dtrain eval` of that checkpoint reports the same accuracy.
    strategy_.finish(state_, reached_end);
    // The other async workers may have ended the last epoch after the chief's last step.
    if (reached_end && epoch_ended()) write_epoch_record();
    if (checkpoints_) write_checkpoint();
    if (!reached_end && result_.halt_signal != 0) return halted();
    result_.global_step = state_.step;
    result_.steps_run = local_steps_;
    result_.train_seconds = seconds(train_time_);
    result_.examples_per_second =
        result_.train_seconds > 0 ? local_steps_ * c_.batch_size / result_.train_seconds : 0;
    result_.final_loss = loss_;
    if (best_) restore_best();
    result_.test_accuracy = evaluate();
    if (place_.chief) {
      run_log_.write(
          {state_.step,
           {{"train_seconds", result_.train_seconds}, {"test_accuracy", result_.test_accuracy}},
           /*final=*/true});
    }
    run_log_.close();
    worker_log_.close();
    RunEnd end = run_end(first_step);
    if (place_.chief)
      end.warnings = state_.model().statistics_warnings(state_.eval_params(), state_.step);
    print_closing_lines(out_, strategy_, end);
    return result_;
  }

  // Stopped by a signal: what was kept, and what a restart resumes from. No evaluation: a stopping
  // task has its scheduler's grace period and no more.
  TrainResult halted() {
    result_.global_step = state_.step;
    result_.steps_run = local_steps_;
    result_.train_seconds = seconds(train_time_);
    result_.final_loss = loss_;
    run_log_.close();
    worker_log_.close();
    const bool left = left_job_;
    print_stopped_line(out_, run_end(0), left,
                       checkpoints_ ? std::optional(c_.train_dir) : std::nullopt);
    if (left) result_.halt_signal = 0;  // a clean leave, not a failure
    return result_;
  }

  RunEnd run_end(int64_t first_step) const {
    return RunEnd{.place = place_,
                  .result = &result_,
                  .first_step = first_step,
                  .local_steps = local_steps_,
                  .batch_size = c_.batch_size,
                  .target_accuracy = c_.target_accuracy,
                  .warnings = {}};
  }

  const TrainConfig& c_;
  const TrainingInput& input_;
  const Dataset& validation_;
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
  std::optional<CheckpointManager> checkpoints_;  // the chief's, with --train_dir
  // The chief's, with --train_dir and --early_stopping_patience: train_dir/best/.
  std::optional<CheckpointManager> best_checkpoints_;
  RunLog run_log_;     // likewise, with --train_dir or --logdir
  RunLog worker_log_;  // a distributed worker's own event file, with --train_dir or --logdir
  ExamplesRecord examples_record_;  // --record_examples
  bool histograms_ = false;         // the chief's, with --summary_steps

  int64_t next_histograms_ = 0;
  HistogramSnapshots histograms_taken_;
  int64_t step_at_last_log_ = 0;
  std::optional<LogCadence> log_cadence_;  // from the first step

  TrainResult result_;
  bool left_job_ = false;  // the halt is this worker's leave of a job that goes on
  int64_t local_steps_ = 0;
  int64_t epoch_ = 0;  // of the last batch
  float loss_ = 0;
  std::unique_ptr<LoopMetrics> metrics_;         // --metrics_port
  TrainingMetrics* training_metrics_ = nullptr;  // its series
  int64_t next_eval_ = 0;
  // Early stopping: the weights of the lowest validation loss so far, on every worker that hears
  // of it (the chief; under all-reduce, every replica).
  struct Best {
    int64_t step = 0;
    double loss = 0;
    Checkpoint state;
  };
  std::optional<Best> best_;
  int64_t evaluations_since_best_ = 0;  // the chief's count
  int64_t next_save_ = 0;
  // The chief's epoch records: whole epochs of global steps recorded, and the losses since.
  int64_t epochs_recorded_ = 0;
  double epoch_loss_sum_ = 0;
  int64_t epoch_loss_steps_ = 0;
  Clock::duration train_time_at_epoch_{};
  Clock::time_point last_save_;
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
