// WaitWatch: the watchdog's looks, and its lines.
#include "base/wait_watch.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;

int64_t to_ns(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

double seconds_between(int64_t from_ns, int64_t to_ns) {
  return static_cast<double>(to_ns - from_ns) / 1e9;
}

}  // namespace

WaitWatch::WaitWatch(std::chrono::milliseconds warning, std::vector<std::string> peers,
                     std::string why, std::function<void(const std::string&)> report)
    : warning_(warning),
      peers_(std::move(peers)),
      why_(std::move(why)),
      report_(std::move(report)),
      pending_(std::make_unique<std::atomic<bool>[]>(peers_.size())),
      thread_([this](std::stop_token stop) { watch(stop); }) {}

WaitWatch::~WaitWatch() {
  thread_.request_stop();
  wake_.notify_all();
}

void WaitWatch::begin(const char* what, int64_t step) {
  for (size_t i = 0; i < peers_.size(); ++i) pending_[i].store(true, std::memory_order_relaxed);
  what_.store(what, std::memory_order_relaxed);
  step_.store(step, std::memory_order_relaxed);
  began_ns_.store(to_ns(Clock::now()), std::memory_order_relaxed);
  op_.fetch_add(1, std::memory_order_release);
  active_.store(true, std::memory_order_release);
}

void WaitWatch::end() {
  ended_ns_.store(to_ns(Clock::now()), std::memory_order_relaxed);
  active_.store(false, std::memory_order_release);
}

void WaitWatch::watch(std::stop_token stop) {
  const auto every =
      std::clamp(warning_ / 4, std::chrono::milliseconds(10), std::chrono::milliseconds(500));
  std::unique_lock lock(mutex_);
  while (!stop.stop_requested()) {
    // A timed look, not a synchronisation: nothing waits on the watchdog.
    wake_.wait_for(lock, stop, every, [] { return false; });
    if (!stop.stop_requested()) look(Clock::now());
  }
}

void WaitWatch::look(Clock::time_point now) {
  const uint64_t op = op_.load(std::memory_order_acquire);
  const bool active = active_.load(std::memory_order_acquire);
  if (reports_ > 0 && (op != reported_op_ || !active)) {
    // The operation reported is over: it ended, or another began, which it did after it ended.
    const int64_t ended = op == reported_op_ ? ended_ns_.load(std::memory_order_relaxed)
                                             : began_ns_.load(std::memory_order_relaxed);
    report_(fmt::format("the wait for the {} ended after {:.1f} s", reported_what_,
                        std::max(0.0, seconds_between(reported_began_ns_, ended))));
    reports_ = 0;
  }
  if (!active) return;
  const int64_t began = began_ns_.load(std::memory_order_relaxed);
  const double waited = seconds_between(began, to_ns(now));
  if (op != reported_op_) reports_ = 0;
  // Reported at the warning, then at twice, four times... the warning.
  const double due = std::chrono::duration<double>(warning_).count() *
                     static_cast<double>(1 << std::min(reports_, 20));
  if (waited < due) return;
  const std::string peers = waited_for();
  if (peers.empty()) return;  // every peer has answered: the operation is ending
  reported_op_ = op;
  reported_began_ns_ = began;
  reported_what_ = fmt::format("{} of step {}", what_.load(std::memory_order_relaxed),
                               step_.load(std::memory_order_relaxed));
  ++reports_;
  report_(fmt::format("waiting {:.1f} s for {} ({}: no reply yet){}", waited, peers, reported_what_,
                      why_.empty() ? "" : "; " + why_));
}

std::string WaitWatch::waited_for() const {
  std::string names;
  for (size_t i = 0; i < peers_.size(); ++i) {
    if (!pending_[i].load(std::memory_order_relaxed)) continue;
    names += fmt::format("{}{}", names.empty() ? "" : ", ", peers_[i]);
  }
  return names;
}

}  // namespace dtrain
