// StragglerWatch: the median of a step's own times, the run of slow steps, and the lines.
#include "metrics/straggler_watch.h"

#include <fmt/format.h>

#include <algorithm>

namespace dtrain {

void StragglerWatch::reset(size_t workers) {
  slow_for_.assign(workers, 0);
  named_.assign(workers, false);
  totals_.assign(workers, 0.0);
  steps_ = 0;
}

std::vector<std::string> StragglerWatch::observe(std::span<const float> seconds,
                                                 const std::function<std::string(int)>& name) {
  if (seconds.size() != slow_for_.size()) reset(seconds.size());
  std::vector<std::string> lines;
  just_named_.clear();
  if (seconds.empty()) return lines;
  sorted_.assign(seconds.begin(), seconds.end());
  const size_t middle = sorted_.size() / 2;
  std::nth_element(sorted_.begin(), sorted_.begin() + static_cast<std::ptrdiff_t>(middle),
                   sorted_.end());
  const double median = sorted_[middle];
  for (size_t rank = 0; rank < seconds.size(); ++rank) {
    totals_[rank] += seconds[rank];
    const bool slow = seconds[rank] > kRatio * median && seconds[rank] - median > kMinExcessSeconds;
    slow_for_[rank] = slow ? slow_for_[rank] + 1 : 0;
    if (slow_for_[rank] < kSteps || named_[rank]) continue;
    named_[rank] = true;
    lines.push_back(fmt::format(
        "{} is a straggler: {} has taken more than {}x the workers' median for {} steps in a row "
        "({:.1f} ms against {:.1f} ms, {:.1f}x, at the last)",
        name(static_cast<int>(rank)), measure_, kRatio, kSteps, seconds[rank] * 1e3, median * 1e3,
        median > 0 ? seconds[rank] / median : 0.0));
    just_named_.emplace_back(static_cast<int>(rank), lines.back());
  }
  ++steps_;
  return lines;
}

WorkerTimes StragglerWatch::times(std::span<const float> seconds,
                                  const std::function<std::string(int)>& name) const {
  WorkerTimes times;
  for (size_t rank = 0; rank < seconds.size(); ++rank)
    times.workers.push_back({.name = name(static_cast<int>(rank)), .step_seconds = seconds[rank]});
  for (const auto& [rank, line] : just_named_) times.stragglers.emplace_back(name(rank), line);
  return times;
}

std::string StragglerWatch::take_summary(const std::function<std::string(int)>& name) {
  if (steps_ == 0) return "";
  std::string line = fmt::format("own step time (ms, mean of {} steps):", steps_);
  for (size_t rank = 0; rank < totals_.size(); ++rank) {
    line += fmt::format("{} {} {:.2f}", rank == 0 ? "" : ",", name(static_cast<int>(rank)),
                        totals_[rank] / static_cast<double>(steps_) * 1e3);
  }
  std::fill(totals_.begin(), totals_.end(), 0.0);
  steps_ = 0;
  return line;
}

}  // namespace dtrain
