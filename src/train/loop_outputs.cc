#include "train/loop_outputs.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "metrics/tensorboard_sink.h"
#include "train/run_report.h"

namespace dtrain {

LoopOutputs::LoopOutputs(const TrainConfig& config, const WorkerPlace& place, Strategy& strategy,
                         std::ostream& out)
    : c_(config), place_(place), strategy_(strategy), out_(out) {
  if (place_.chief) open_chief();
  // Each worker's events (the chief's too) go to worker_<rank>/ in the log folder, so that
  // TensorBoard shows one run per worker beside the run's own.
  if (const std::filesystem::path dir = log_dir(); !dir.empty() && place_.distributed) {
    worker_log_.add_sink(
        std::make_unique<TensorBoardSink>(dir / fmt::format("worker_{}", place_.name_index())));
  }
  if (!c_.record_examples.empty())
    examples_record_ = ExamplesRecord(c_.record_examples, place_.distributed, place_.name_index());
  // --metrics_port: served from here on, for the run's whole length; the chief's run log feeds
  // its live page.
  if (c_.metrics_port >= 0) {
    metrics_ = std::make_unique<LoopMetrics>(c_, place_, strategy_, out_, prefix());
    training_metrics_ = &metrics_->training();
    if (place_.chief) run_log_.add_sink(metrics_->board_sink());
  }
}

// The chief writes the run log; its events go to the log folder.
void LoopOutputs::open_chief() {
  if (!c_.train_dir.empty())
    run_log_.add_sink(std::make_unique<JsonLinesSink>(c_.train_dir / "metrics.jsonl"));
  if (c_.observer != nullptr) run_log_.add_sink(std::make_unique<ForwardingSink>(*c_.observer));
  if (const std::filesystem::path dir = log_dir(); !dir.empty()) {
    run_log_.add_sink(std::make_unique<TensorBoardSink>(dir));
    histograms_ = c_.summary_steps > 0;
  }
}

void LoopOutputs::close_chief() {
  run_log_.close();
  histograms_ = false;
}

void LoopOutputs::start(int64_t first_step, const std::string& strategy) {
  const bool resumed = first_step > 0;
  if (resumed) worker_log_.write({.step = first_step, .resumed = true});
  count_histograms_from(first_step);
  if (!place_.chief) return;
  std::string config;
  const std::string settings = train_config_json(c_).dump(2);
  for (std::string_view rest = settings; !rest.empty();) {
    const size_t end = rest.find('\n');
    config += fmt::format("    {}\n", rest.substr(0, end));  // a Markdown code block
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
  }
  run_log_.write(
      {.step = first_step,
       .texts = {{"config", fmt::format("dtrain train, strategy {}:\n\n{}", strategy, config)}},
       .start = true,
       .resumed = resumed});
}

void LoopOutputs::step(const TrainingState& state, const Step& step, int64_t width) {
  if (step.advanced_one) examples_record_.write(state.step, step.epoch, step.batch, width);
  if (training_metrics_) {
    training_metrics_->step(state.step, step.local_step, step.batch.size, step.loss, step.seconds);
    training_metrics_->phases(step.phases.compute, step.phases.communicate, step.phases.apply);
  }
}

void LoopOutputs::worker_counts(const std::vector<std::pair<int64_t, double>>& counts) {
  for (const auto& [step, workers] : counts) {
    if (place_.chief && run_log_.enabled()) run_log_.write({step, {{"workers", workers}}});
    if (training_metrics_) training_metrics_->workers(static_cast<int>(workers));
  }
}

void LoopOutputs::count_histograms_from(int64_t step) {
  if (histograms_) next_hist_ = next_multiple(step, c_.summary_steps);
}

void LoopOutputs::histograms_if_due(TrainingState& state) {
  if (!histograms_ || state.step < next_hist_) return;
  next_hist_ = next_multiple(state.step, c_.summary_steps);
  run_log_.write(
      {.step = state.step, .histograms = histograms_taken_.take(state.params(), state.grads())});
}

void LoopOutputs::step_line(const Line& line) {
  const double s = line.seconds;
  const double examples_per_second = s > 0 ? line.steps * c_.batch_size / s : 0.0;
  const double steps_per_second = s > 0 ? line.global_steps / s : 0.0;
  if (place_.distributed) {
    fmt::print(out_,
               "worker={}, epoch={}, global_step={}, local_step={}, loss={:.4f} ({:.1f} "
               "examples/sec)\n",
               place_.name_index(), line.epoch, line.step, line.local_steps, line.loss,
               examples_per_second);
  } else {
    fmt::print(out_, "step {}, loss = {:.4f} ({:.1f} examples/sec; {:.4f} sec/batch)\n", line.step,
               line.loss, examples_per_second, line.steps > 0 ? s / line.steps : 0.0);
  }
  LogExtras extras = strategy_.log_extras();
  for (const std::string& text : extras.lines) fmt::print(out_, "{}{}\n", prefix(), text);
  out_ << std::flush;
  if (place_.chief && run_log_.enabled()) {
    RunRecord record{line.step,
                     {{"loss", line.loss},
                      {"learning_rate", line.learning_rate},
                      {"examples_per_sec", examples_per_second},
                      {"steps_per_sec", steps_per_second}}};
    for (auto& scalar : extras.scalars) record.scalars.push_back(std::move(scalar));
    run_log_.write(record);
  }
  worker_log_.write({line.step, {{"loss", line.loss}, {"examples_per_sec", examples_per_second}}});
}

void LoopOutputs::epoch_record(int64_t step, int64_t epochs, double loss,
                               double examples_per_second) {
  run_log_.write({step,
                  {{"epoch_loss", loss},
                   {"epochs", static_cast<double>(epochs)},
                   {"epoch_examples_per_sec", examples_per_second}}});
}

void LoopOutputs::final_record(int64_t step, double train_seconds, double test_accuracy) {
  if (!place_.chief) return;
  run_log_.write({step,
                  {{"train_seconds", train_seconds}, {"test_accuracy", test_accuracy}},
                  /*final=*/true});
}

void LoopOutputs::close() {
  run_log_.close();
  worker_log_.close();
}

std::filesystem::path LoopOutputs::log_dir() const {
  return c_.logdir.empty() ? c_.train_dir : c_.logdir;
}

std::string LoopOutputs::prefix() const { return line_prefix(place_); }

}  // namespace dtrain
