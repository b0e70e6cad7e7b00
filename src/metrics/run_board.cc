// RunBoard: the series thinned as they come, the workers' last reports and their states, and the
// JSON of /api/run.
#include "metrics/run_board.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

namespace dtrain {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The run log's scalar behind each series of /api/run.
constexpr std::pair<const char*, const char*> kSeries[] = {
    {"loss", "loss"},
    {"validation/accuracy", "accuracy"},
    {"learning_rate", "learning_rate"},
    {"examples_per_sec", "examples_per_sec"},
};

// A stalled worker: no step for stall_seconds, and for this many of its mean step times (a run
// of 30-second steps is not stalled after 5 s).
constexpr double kStallSteps = 20;

// NaN and the infinities are not JSON: null.
nlohmann::json number(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}

}  // namespace

RunBoard::RunBoard(std::string task, RunBoardLimits limits, std::function<double()> clock)
    : task_(std::move(task)),
      limits_(limits),
      clock_(clock ? std::move(clock) : std::function<double()>(steady_seconds)),
      started_at_(clock_()),
      test_accuracy_(kNaN) {
  for (const auto& [scalar, name] : kSeries) series_[name];
}

void RunBoard::add(Series& series, int64_t step, double value) {
  // One value per step, the first; a step before the last is an earlier run's (the loop logs in
  // step order).
  if (!std::isfinite(value)) return;
  if (!series.points.empty() && static_cast<double>(step) <= series.points.back()[0]) return;
  const int64_t arrival = series.arrivals++;
  if (arrival % series.stride != 0) return;
  series.points.push_back({static_cast<double>(step), clock_() - started_at_, value});
  if (series.points.size() <= limits_.max_points) return;
  // Keep the values that came at multiples of twice the stride: those at even places.
  size_t kept = 0;
  for (size_t i = 0; i < series.points.size(); i += 2) series.points[kept++] = series.points[i];
  series.points.resize(kept);
  series.stride *= 2;
}

void RunBoard::record(const RunRecord& record) {
  std::lock_guard lock(mutex_);
  step_ = std::max(step_, record.step);
  finished_ = finished_ || record.final;
  for (const auto& [scalar, value] : record.scalars) {
    if (scalar == "test_accuracy") test_accuracy_ = value;
    for (const auto& [wanted, name] : kSeries) {
      if (scalar == wanted) add(series_.find(name)->second, record.step, value);
    }
  }
}

RunBoard::Worker* RunBoard::worker(const std::string& name) {
  if (const auto found = workers_.find(name); found != workers_.end()) return &found->second;
  if (workers_.size() >= limits_.max_workers) return nullptr;
  Worker& added = workers_[name];
  added.seen_at = clock_();  // not stalled before it could have reported
  return &added;
}

void RunBoard::own_step(int64_t global_step, double seconds) {
  std::lock_guard lock(mutex_);
  step_ = std::max(step_, global_step);
  if (cluster_view_) return;  // the chief's report of every worker says this one's too
  Worker* own = worker(task_);
  own->step = global_step;
  own->step_seconds = seconds;
  own->mean_seconds += (seconds - own->mean_seconds) / static_cast<double>(++own->reports);
  own->seen_at = clock_();
}

void RunBoard::workers(const WorkerTimes& times) {
  std::lock_guard lock(mutex_);
  if (!cluster_view_) workers_.clear();  // this task's own entry may go by another name there
  cluster_view_ = true;
  ++reports_;
  const double now = clock_();
  for (const WorkerTimes::Worker& reported : times.workers) {
    Worker* w = worker(reported.name);
    if (w == nullptr) continue;
    w->last_report = reports_;
    if (reported.step_seconds < 0) continue;  // a member with no step since the last report
    w->step = reported.steps >= 0 ? reported.steps : step_;
    w->step_seconds = reported.step_seconds;
    w->mean_seconds +=
        (reported.step_seconds - w->mean_seconds) / static_cast<double>(++w->reports);
    w->seen_at = now;
  }
  for (const auto& [name, line] : times.stragglers) {
    if (Worker* w = worker(name)) w->straggler = line;
    if (stragglers_.size() < limits_.max_stragglers) {
      stragglers_.emplace_back(name, line);
    } else {
      ++stragglers_dropped_;
    }
  }
}

std::string RunBoard::state_of(const Worker& w, double now) const {
  if (finished_) return "finished";
  if (cluster_view_ && w.last_report < reports_) return "left";  // not in the chief's last report
  const double quiet = now - w.seen_at;
  if (quiet > limits_.stall_seconds && quiet > kStallSteps * w.mean_seconds) return "stalled";
  if (!w.straggler.empty()) return "straggler";
  return "training";
}

nlohmann::json RunBoard::to_json() const {
  std::lock_guard lock(mutex_);
  const double now = clock_();
  nlohmann::json series = nlohmann::json::object();
  for (const auto& [name, s] : series_) {
    nlohmann::json points = nlohmann::json::array();
    for (const auto& [step, seconds, value] : s.points) points.push_back({step, seconds, value});
    series[name] = {{"stride", s.stride}, {"points", std::move(points)}};
  }
  nlohmann::json workers = nlohmann::json::array();
  nlohmann::json stalled = nlohmann::json::array();
  for (const auto& [name, w] : workers_) {
    const std::string state = state_of(w, now);
    workers.push_back({{"name", name},
                       {"step", w.step},
                       {"step_ms", w.step_seconds * 1e3},
                       {"mean_step_ms", w.mean_seconds * 1e3},
                       {"state", state},
                       {"seconds_since_report", now - w.seen_at}});
    if (state == "stalled") stalled.push_back({{"name", name}, {"seconds", now - w.seen_at}});
  }
  nlohmann::json stragglers = nlohmann::json::array();
  for (const auto& [name, line] : stragglers_)
    stragglers.push_back({{"name", name}, {"line", line}});
  return {{"task", task_},
          {"step", step_},
          {"seconds", now - started_at_},
          {"finished", finished_},
          {"test_accuracy", number(test_accuracy_)},
          {"series", std::move(series)},
          {"max_points", limits_.max_points},
          {"workers", std::move(workers)},
          {"stragglers", std::move(stragglers)},
          {"stragglers_dropped", stragglers_dropped_},
          {"stalled", std::move(stalled)}};
}

std::string RunBoard::json() const { return to_json().dump(); }

}  // namespace dtrain
