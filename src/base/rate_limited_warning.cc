#include "base/rate_limited_warning.h"

#include <fmt/format.h>

#include "base/log.h"

namespace dtrain {

RateLimitedWarning::RateLimitedWarning(std::string source, std::string what, int burst,
                                       Clock::duration window)
    : source_(std::move(source)), what_(std::move(what)), burst_(burst), window_(window) {}

RateLimitedWarning::~RateLimitedWarning() { flush(); }

void RateLimitedWarning::warn(const std::string& kind, const std::string& line) {
  std::lock_guard lock(mutex_);
  const auto now = Clock::now();
  if (now - window_start_ >= window_) {
    flush_locked();
    window_start_ = now;
    logged_ = 0;
  }
  if (logged_ < burst_) {
    ++logged_;
    spdlog::warn("{}", line);
    return;
  }
  ++suppressed_[kind];
}

void RateLimitedWarning::flush_if_due() {
  std::lock_guard lock(mutex_);
  if (Clock::now() - window_start_ >= window_) flush_locked();
}

void RateLimitedWarning::flush() {
  std::lock_guard lock(mutex_);
  flush_locked();
}

void RateLimitedWarning::flush_locked() {
  if (suppressed_.empty()) return;
  uint64_t total = 0;
  std::string kinds;
  for (const auto& [kind, count] : suppressed_) {
    total += count;
    kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", count, kind);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - window_start_).count();
  spdlog::warn("{}: {} more {} in the last {:.0f} s, not logged one by one ({})", source_, total,
               what_, seconds, kinds);
  suppressed_.clear();
}

}  // namespace dtrain
