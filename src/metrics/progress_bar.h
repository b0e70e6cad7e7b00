// A one-line progress bar with rate and ETA for terminals: "[#####.....] 52% 2860/5500 ETA 3.1s".
// Only drawn when the caller says the output is a terminal; logs and pipes get step lines instead.
// Under the local launcher the chief's bar travels through a pipe, and the launcher, on its
// terminal, draws it (cluster/output_relay.h): hence the plain "\r<bar>\x1b[K" with no newline.
#pragma once

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>

namespace dtrain {

class ProgressBar {
 public:
  ProgressBar(std::ostream& out, int64_t total, bool enabled);
  // Redraws at most ~10 times a second.
  void update(int64_t done, double loss);
  // Erases the bar so the next line starts clean.
  void clear();
  void finish();

 private:
  std::ostream& out_;
  int64_t total_;
  bool enabled_;
  bool drawn_ = false;
  int64_t first_done_ = -1;  // at the first update: where a resumed run started
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

// "1m05s", "3.2s"
std::string format_duration(double seconds);

}  // namespace dtrain
