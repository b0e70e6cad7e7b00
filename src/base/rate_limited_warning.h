// A warning that a peer can make us repeat without end (a flood of connections, each rejected):
// the first few of each window are logged one by one, the rest only counted, by kind, and summed
// up in one line once the window is over. Without it, a flood of junk connections wrote 21 MB of
// log on the task it attacked.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace dtrain {

class RateLimitedWarning {
 public:
  using Clock = std::chrono::steady_clock;

  // `what` names the events in the summary ("rejected connections"); `source`, who reports them
  // ("server on port 2222").
  RateLimitedWarning(std::string source, std::string what, int burst = 5,
                     Clock::duration window = std::chrono::seconds(10));
  ~RateLimitedWarning();  // logs what is still counted

  // Logs `line` as a warning while this window's burst lasts; counts it under `kind` after that.
  void warn(const std::string& kind, const std::string& line);
  // Logs the summary of a window that is over, if it counted anything: call now and then.
  void flush_if_due();
  // Logs the summary of what is counted now, window over or not.
  void flush();

 private:
  void flush_locked();

  const std::string source_;
  const std::string what_;
  const int burst_;
  const Clock::duration window_;
  std::mutex mutex_;
  Clock::time_point window_start_{};            // guarded by mutex_
  int logged_ = 0;                              // guarded by mutex_: in this window
  std::map<std::string, uint64_t> suppressed_;  // guarded by mutex_: kind -> count
};

}  // namespace dtrain
