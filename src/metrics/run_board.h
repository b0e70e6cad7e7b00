// What the live page at / of a task's --metrics_port shows (metrics/metrics_endpoint.h), as the
// JSON of /api/run: the run's series (step, loss, validation accuracy, learning rate, examples per
// second, wall time), every worker's last step, step time and state, and the stragglers and stalls
// by name. Pure logic: fed by the training loop's run log and step times, read by the server.
// Bounded memory: past max_points points the series keep every second one, and so on (as
// metrics/run_series.h reads a file), so a run of any length costs at most max_points × 6 doubles;
// at most max_workers workers and max_stragglers straggler lines are kept.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "metrics/run_log.h"

namespace dtrain {

// What the chief learns of every worker at one step: each one's own time for it, and the
// stragglers named at that step (metrics/straggler_watch.h).
struct WorkerTimes {
  struct Worker {
    std::string name;
    double step_seconds = 0;  // negative: a member with no step since the last report
    int64_t steps = -1;       // its own steps so far, where they differ (ps); else the global step
  };
  std::vector<Worker> workers;
  std::vector<std::pair<std::string, std::string>> stragglers = {};  // name, the line naming it
};

struct RunBoardLimits {
  size_t max_points = 2000;  // per series; a chart is a thousand pixels wide at most
  size_t max_workers = 256;
  size_t max_stragglers = 64;
  // A worker that has reported no step for this long, and for 20 of its mean step times, is
  // stalled.
  double stall_seconds = 5;
};

// Thread-safety: every member may be called from any thread (the loop writes, the server reads).
class RunBoard {
 public:
  // `task` names the task whose page it is ("worker0", "local"); `clock` says the seconds now on
  // a monotonic clock (the steady clock's unless a test gives its own).
  explicit RunBoard(std::string task, RunBoardLimits limits = {},
                    std::function<double()> clock = {});

  // A record of the run log (metrics/run_log.h): step lines give loss, learning_rate and
  // examples_per_sec; evaluations validation/accuracy; the closing one test_accuracy.
  void record(const RunRecord& record);
  // This task's own step: the global step it reached and the seconds it took.
  void own_step(int64_t global_step, double seconds);
  // Every worker's own step time at the chief's latest step, and the stragglers just named.
  void workers(const WorkerTimes& times);

  // /api/run's body.
  std::string json() const;
  nlohmann::json to_json() const;

 private:
  // One scalar's points, each [step, seconds since the board began, value], thinned as they come.
  struct Series {
    std::vector<std::array<double, 3>> points;  // in step order
    int64_t stride = 1;                         // every stride-th value that came is kept
    int64_t arrivals = 0;                       // values that came
  };
  struct Worker {
    int64_t step = 0;
    double step_seconds = 0;
    double mean_seconds = 0;  // over every step reported
    int64_t reports = 0;
    int64_t last_report = 0;  // the call of workers() it was last in
    double seen_at = 0;       // clock()
    std::string straggler;    // the line that named it, if one did
  };

  // REQUIRES (both): mutex_ held.
  void add(Series& series, int64_t step, double value);
  Worker* worker(const std::string& name);  // nullptr past max_workers
  std::string state_of(const Worker& worker, double now) const;

  const std::string task_;
  const RunBoardLimits limits_;
  const std::function<double()> clock_;
  const double started_at_;
  mutable std::mutex mutex_;
  // By the name /api/run gives it; guarded by mutex_, as everything below.
  std::map<std::string, Series, std::less<>> series_;
  int64_t step_ = 0;  // the latest global step seen
  double test_accuracy_;
  bool finished_ = false;  // the run log's closing record came
  std::map<std::string, Worker, std::less<>> workers_;
  bool cluster_view_ = false;  // workers() has been called: the board knows every worker
  int64_t reports_ = 0;        // calls of workers()
  std::vector<std::pair<std::string, std::string>> stragglers_;  // name, line; in order named
  int64_t stragglers_dropped_ = 0;
};

// Hands the run log's records to a board (the chief's, so that its page has the run's series).
class RunBoardSink final : public RunLogSink {
 public:
  explicit RunBoardSink(RunBoard& board) : board_(board) {}
  void write(const RunRecord& record) override { board_.record(record); }

 private:
  RunBoard& board_;
};

}  // namespace dtrain
