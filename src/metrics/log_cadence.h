// When the training loop prints a step line: every N steps, or once S seconds have passed since the
// last line, whichever comes first, so that a slow run still says how it goes and a fast one stays
// readable. The clock is the caller's, so tests pass time points instead of sleeping.
#pragma once

#include <chrono>
#include <cstdint>

namespace dtrain {

class LogCadence {
 public:
  using Clock = std::chrono::steady_clock;

  // every_steps 0: no lines at all; every_seconds 0: by steps alone. start: when the first
  // interval began.
  LogCadence(int64_t every_steps, double every_seconds, Clock::time_point start)
      : every_steps_(every_steps),
        every_(std::chrono::duration<double>(every_seconds)),
        last_(start) {}

  // Whether a line is due after `step` (counted as the caller counts steps) at `now`; a due line
  // is taken as written at `now`.
  bool due(int64_t step, Clock::time_point now) {
    if (every_steps_ <= 0) return false;
    const bool by_steps = step % every_steps_ == 0;
    const bool by_time = every_.count() > 0 && now - last_ >= every_;
    if (!by_steps && !by_time) return false;
    last_ = now;
    return true;
  }

 private:
  int64_t every_steps_;
  std::chrono::duration<double> every_;
  Clock::time_point last_;
};

}  // namespace dtrain
