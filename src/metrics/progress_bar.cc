// Terminal progress bar.
#include "metrics/progress_bar.h"

#include <fmt/format.h>

namespace dtrain {

std::string format_duration(double seconds) {
  if (seconds < 60) return fmt::format("{:.1f}s", seconds);
  const int64_t s = static_cast<int64_t>(seconds);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
}

ProgressBar::ProgressBar(std::ostream& out, int64_t total, bool enabled)
    : out_(out),
      total_(total),
      enabled_(enabled && total > 0),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

void ProgressBar::update(int64_t done, double loss) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_draw_ < std::chrono::milliseconds(100) && done < total_) return;
  last_draw_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  if (first_done_ < 0) first_done_ = done;
  const double fraction = static_cast<double>(done) / static_cast<double>(total_);
  // From the rate since the bar's first update, so that a resumed run's ETA counts only what it
  // has run itself.
  const int64_t run = done - first_done_;
  const double eta =
      run > 0 ? elapsed * static_cast<double>(total_ - done) / static_cast<double>(run) : 0.0;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(fraction * kWidth);
  out_ << fmt::format("\r[{}{}] {:3.0f}% {}/{} loss {:.4f} ETA {}\x1b[K", std::string(filled, '#'),
                      std::string(kWidth - filled, '.'), fraction * 100, done, total_, loss,
                      format_duration(eta))
       << std::flush;
  drawn_ = true;
}

void ProgressBar::clear() {
  if (drawn_) out_ << "\r\x1b[K" << std::flush;
  drawn_ = false;
}

void ProgressBar::finish() { clear(); }

}  // namespace dtrain
