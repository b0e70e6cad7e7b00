// WorkerPace: intervals between pushes, rounds, and the straggler rule over them.
#include "ps/worker_pace.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace dtrain {

WorkerPace::WorkerPace(int workers, std::function<void(const std::string&)> report)
    : report_(std::move(report)),
      last_(static_cast<size_t>(std::max(workers, 0))),
      totals_(last_.size()),
      round_(last_.size(), -1.0f) {}

void WorkerPace::pushed(int worker, Clock::time_point now, Clock::time_point since) {
  if (worker < 0 || static_cast<size_t>(worker) >= last_.size()) return;
  const auto w = static_cast<size_t>(worker);
  std::lock_guard lock(mutex_);
  const Clock::time_point last = std::exchange(last_[w], now);
  if (last == Clock::time_point{}) return;
  // A sync step applied before this worker's last push was not the one it waited for; one applied
  // after this push was stamped (a backup worker's gradient, late for it) took none of its time.
  const Clock::time_point began = std::min(since > last ? since : last, now);
  const double seconds = std::chrono::duration<double>(now - began).count();
  totals_[w].seconds += seconds;
  ++totals_[w].steps;
  round_[w] = static_cast<float>(seconds);
  // The round is complete once every worker that has pushed has an interval in it.
  for (size_t i = 0; i < last_.size(); ++i) {
    if (last_[i] != Clock::time_point{} && round_[i] < 0) return;
  }
  end_round();
}

void WorkerPace::end_round() {
  // Only workers in the round: one that never pushed has no time to compare.
  times_.clear();
  workers_.clear();
  for (size_t i = 0; i < round_.size(); ++i) {
    if (round_[i] < 0) continue;
    times_.push_back(round_[i]);
    workers_.push_back(static_cast<int>(i));
  }
  std::fill(round_.begin(), round_.end(), -1.0f);
  if (times_.size() < 2) return;
  const auto name = [this](int index) {
    return fmt::format("worker{}", workers_[static_cast<size_t>(index)]);
  };
  for (const std::string& line : stragglers_.observe(times_, name)) report_(line);
}

std::vector<WorkerPace::Totals> WorkerPace::totals() const {
  std::lock_guard lock(mutex_);
  return totals_;
}

std::string mean_step_times_ms(std::span<const WorkerPace::Totals> now,
                               std::span<const WorkerPace::Totals> before) {
  std::string line;
  for (size_t w = 0; w < now.size(); ++w) {
    WorkerPace::Totals since = now[w];
    if (w < before.size() && before[w].steps <= now[w].steps) {
      since.steps -= before[w].steps;
      since.seconds -= before[w].seconds;
    }
    if (since.steps == 0) continue;  // a worker that has not pushed since (or ever)
    // Rounding of the running sums can leave a hair below zero: "-0.00" says nothing true.
    const double ms = std::max(0.0, since.seconds / since.steps * 1e3);
    line += fmt::format("{} worker{} {:.2f}", line.empty() ? "" : ",", w, ms);
  }
  return line;
}

}  // namespace dtrain
