// A run's numbers — loss, learning rate, throughput, test accuracy, histograms of the variables —
// recorded from one place, the training loop, and handed to every sink the run has: metrics.jsonl
// and TensorBoard event files. A new log format is a new RunLogSink and nothing else.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "metrics/metrics_log.h"

namespace dtrain {

// A tensor's values under a tag, for a histogram.
struct NamedValues {
  std::string tag;
  std::vector<float> values;
};

struct RunRecord {
  int64_t step = 0;  // the global step the numbers belong to
  std::vector<std::pair<std::string, double>> scalars = {};
  bool final = false;  // the run's closing record
  // Shared, so that a sink can summarise them on a thread of its own after write() returns.
  std::shared_ptr<const std::vector<NamedValues>> histograms = {};
  std::vector<std::pair<std::string, std::string>> texts = {};  // tag, Markdown
  // The run's first record, at the step it starts from: where its clock starts.
  bool start = false;
  // The run resumed at `step`: what an earlier run logged from there on is superseded.
  bool resumed = false;
};

class RunLogSink {
 public:
  virtual ~RunLogSink() = default;
  // Throws IoError naming the file when it cannot be written (a sink that writes later may report
  // an earlier record's failure here).
  virtual void write(const RunRecord& record) = 0;
  // Everything written reaches the file; throws IoError as write() does.
  virtual void close() {}
};

// metrics.jsonl: one JSON object per record that has scalars, {"step": S, <scalar>: value, ...,
// "final": true, "wall_time": seconds since the Unix epoch}, and one per start of the run,
// {"step": S, "start": true, "resumed": true, "wall_time": ...} ("resumed" only when it resumed
// from a checkpoint at S), so that a reader knows where the clock starts and which lines a resumed
// run supersedes (metrics/run_series.h reads them back). Histograms and texts are TensorBoard's
// alone.
class JsonLinesSink final : public RunLogSink {
 public:
  explicit JsonLinesSink(const std::filesystem::path& path) : log_(path) {}
  void write(const RunRecord& record) override;

 private:
  MetricsLog log_;
};

// Hands every record to a sink that someone else owns (TrainConfig::observer).
// Seconds since the Unix epoch: TensorBoard's Event.wall_time, metrics.jsonl's "wall_time".
double wall_time_now();

class ForwardingSink final : public RunLogSink {
 public:
  explicit ForwardingSink(RunLogSink& target) : target_(target) {}
  void write(const RunRecord& record) override { target_.write(record); }

 private:
  RunLogSink& target_;
};

// Not thread-safe: the training loop writes from its own thread, between steps, so the time a sink
// takes is never counted as training time.
class RunLog {
 public:
  void add_sink(std::unique_ptr<RunLogSink> sink) { sinks_.push_back(std::move(sink)); }
  bool enabled() const { return !sinks_.empty(); }
  void write(const RunRecord& record);
  // Closes every sink and drops it: later records go nowhere (enabled() is false).
  void close();

 private:
  std::vector<std::unique_ptr<RunLogSink>> sinks_;
};

}  // namespace dtrain
