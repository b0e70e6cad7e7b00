// PeerWait: the backoff is slept in short slices, so that a stop request or a due report is not
// held up by it.
#include "comm/peer_wait.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <thread>

#include "base/error.h"

namespace dtrain {
namespace {

constexpr auto kFirstBackoff = std::chrono::milliseconds(50);
constexpr auto kMaxBackoff = std::chrono::milliseconds(1000);
// How soon a stop request ends a pause.
constexpr auto kSlice = std::chrono::milliseconds(50);

// "0.5 s", "8 s", "20 s": tenths only where they matter.
std::string seconds_text(std::chrono::milliseconds ms) {
  const double seconds = static_cast<double>(ms.count()) / 1000;
  return fmt::format("{:g} s", seconds >= 10 ? std::round(seconds) : std::round(seconds * 10) / 10);
}

}  // namespace

PeerWait::PeerWait(PeerWaitOptions options)
    : options_(std::move(options)),
      start_(options_.started.value_or(Clock::now())),
      deadline_(start_ + options_.timeout),
      next_report_(start_ + options_.report_interval),
      backoff_(kFirstBackoff) {}

void PeerWait::check_stop() const {
  if (options_.abandon) {
    if (std::string why = options_.abandon(); !why.empty()) throw TransportError(why);
  }
  if (options_.stop == nullptr || !options_.stop->requested()) return;
  throw StopRequested(
      fmt::format("stopped by {} while waiting for {} at {}", signal_name(options_.stop->signal()),
                  options_.peer, options_.address),
      options_.stop->signal());
}

void PeerWait::failed(std::string error) {
  ++attempts_;
  last_error_ = std::move(error);
  // An attempt may itself last long (an unanswered SYN, a stalled handshake).
  report_if_due(Clock::now());
}

bool PeerWait::pause() {
  check_stop();
  const auto until = Clock::now() + backoff_;
  if (until >= deadline_) return false;
  // Pacing attempts at a peer that is not up yet; nothing is being synchronised with.
  for (auto now = Clock::now(); now < until; now = Clock::now()) {
    std::this_thread::sleep_for(std::min<Clock::duration>(kSlice, until - now));
    check_stop();
    report_if_due(Clock::now());
  }
  backoff_ = std::min<Clock::duration>(2 * backoff_, kMaxBackoff);
  return true;
}

void PeerWait::report_if_due(Clock::time_point now) {
  if (!options_.report || options_.report_interval.count() <= 0 || now < next_report_) return;
  while (next_report_ <= now) next_report_ += options_.report_interval;
  const auto left = std::chrono::duration<double>(deadline_ - now).count();
  options_.report(fmt::format("still waiting for {} at {} ({}); {:.0f} s left", options_.peer,
                              options_.address, last_error_.empty() ? "no answer yet" : last_error_,
                              std::max(0.0, std::ceil(left))));
}

void PeerWait::give_up() {
  gave_up_ = true;
  throw TransportError(fmt::format("could not {} {} at {} within {} ({} attempt{}): {}",
                                   options_.verb, options_.peer, options_.address,
                                   seconds_text(options_.timeout), attempts_,
                                   attempts_ == 1 ? "" : "s", last_error_));
}

}  // namespace dtrain
