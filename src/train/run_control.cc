// The orders as a history of rate changes and one stop, so that a worker behind the chief still
// takes the rate of its own step.
#include "train/run_control.h"

#include <algorithm>

namespace dtrain {

void RunControl::post(int64_t step, const RunOrders& orders) {
  {
    const std::lock_guard lock(mutex_);
    if (orders.learning_rate &&
        (rate_changes_.empty() || rate_changes_.back().second != *orders.learning_rate)) {
      rate_changes_.emplace_back(step, *orders.learning_rate);
    }
    if (orders.stop && !stop_at_) stop_at_ = step;
    last_posted_ = std::max(last_posted_, step);
  }
  posted_.notify_all();
}

RunOrders RunControl::orders_at(int64_t step) {
  std::unique_lock lock(mutex_);
  // No deadline of its own: the chief posts before each of its steps and closes when its loop
  // ends, by failure too (RunSteering's destructor), so this wait ends with the chief's progress.
  if (lockstep_) posted_.wait(lock, [&] { return last_posted_ >= step || closed_; });
  RunOrders orders;
  for (const auto& [from, rate] : rate_changes_) {
    if (lockstep_ && from > step) break;
    orders.learning_rate = rate;
  }
  const bool never_posted = closed_ && last_posted_ < step;
  orders.stop = (stop_at_ && (!lockstep_ || *stop_at_ <= step)) || never_posted;
  return orders;
}

void RunControl::close() {
  {
    const std::lock_guard lock(mutex_);
    closed_ = true;
  }
  posted_.notify_all();
}

}  // namespace dtrain
