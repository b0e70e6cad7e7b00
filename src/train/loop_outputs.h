// What the training loop writes, each output a sink of its own (DESIGN.md §2a: the loop keeps
// time only): the chief's run log (metrics.jsonl and TensorBoard events in --train_dir or
// --logdir, the owner's observer, the live page), a distributed worker's own event file, the
// chief's histograms (--summary_steps), the examples record (--record_examples) and the metrics
// endpoint (--metrics_port). The loop says what happened and when; these say it where it goes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "data/batcher.h"
#include "metrics/run_log.h"
#include "train/examples_record.h"
#include "train/histogram_snapshots.h"
#include "train/loop_metrics.h"
#include "train/strategy.h"
#include "train/train_config.h"
#include "train/training_state.h"

namespace dtrain {

class LoopOutputs {
 public:
  // Opens the chief's outputs if place is the chief's, the worker's own, and the endpoint.
  // REQUIRES: every argument outlives this; place follows the loop's.
  LoopOutputs(const TrainConfig& config, const WorkerPlace& place, Strategy& strategy,
              std::ostream& out);

  // The chief's run log: where evaluations and epochs are recorded.
  RunLog& run_log() { return run_log_; }
  // The chief's duties begin (at the start, or at the membership change that made this worker
  // the chief) or end (a restarted chief that rejoined a running job).
  void open_chief();
  void close_chief();

  // A resumed run says so first, so that TensorBoard drops what the interrupted one logged after
  // the checkpoint; the chief then records the run's configuration.
  void start(int64_t first_step, const std::string& strategy);

  // A step just made: the endpoint's series and, where it advanced the global step by one, the
  // examples record.
  struct Step {
    const Batch& batch;
    int64_t epoch = 0;
    int64_t local_step = 0;  // from 1
    bool advanced_one = false;
    float loss = 0;
    double seconds = 0;
    StepPhases phases;
  };
  void step(const TrainingState& state, const Step& step, int64_t width);
  // The workers at each membership change, at the step it took effect at.
  void worker_counts(const std::vector<std::pair<int64_t, double>>& counts);
  // The chief's histograms of the state at its step, where --summary_steps says they are due;
  // whether the step that comes must keep its gradient for them.
  void histograms_if_due(TrainingState& state);
  bool histograms_due_after(int64_t step) const { return histograms_ && step + 1 >= next_hist_; }
  void count_histograms_from(int64_t step);

  // A step line's figures, since the last.
  struct Line {
    int64_t step = 0;
    int64_t epoch = 0;
    int64_t local_steps = 0;
    float loss = 0;
    double seconds = 0;  // of training since the last line
    int64_t steps = 0;   // this worker's since the last line
    int64_t global_steps = 0;
    float learning_rate = 0;
  };
  void step_line(const Line& line);
  // An epoch of global steps passed (Keras's epoch_loss: the mean of this worker's losses).
  void epoch_record(int64_t step, int64_t epochs, double loss, double examples_per_second);
  // The chief's closing record.
  void final_record(int64_t step, double train_seconds, double test_accuracy);
  void close();

 private:
  std::filesystem::path log_dir() const;
  std::string prefix() const;

  const TrainConfig& c_;
  const WorkerPlace& place_;
  Strategy& strategy_;
  std::ostream& out_;
  RunLog run_log_;     // the chief's, with --train_dir or --logdir
  RunLog worker_log_;  // a distributed worker's own event file, with --train_dir or --logdir
  ExamplesRecord examples_record_;               // --record_examples
  std::unique_ptr<LoopMetrics> metrics_;         // --metrics_port
  TrainingMetrics* training_metrics_ = nullptr;  // its series
  bool histograms_ = false;                      // the chief's, with --summary_steps
  int64_t next_hist_ = 0;
  HistogramSnapshots histograms_taken_;
};

}  // namespace dtrain
