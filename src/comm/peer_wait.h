// A wait for a peer that is not there yet (connect-with-retry, a reconnection): it paces the
// attempts with backoff, says every report interval whom it waits for, where, the last error and
// the time left, ends at once on a stop request, and gives up with one error that states one
// duration and the last error. One wait may span several layers of retry (connect() inside a
// client's reconnect): they share it, so the user sees one clock.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "base/stop_request.h"

namespace dtrain {

struct PeerWaitOptions {
  std::string peer;            // "ps0", or "the peer"
  std::string address;         // "127.0.0.1:2223"
  std::string verb = "reach";  // the give-up line's "could not <verb> <peer> at <address>"
  std::chrono::milliseconds timeout{30'000};
  // When the wait this one is part of began, where that is earlier than now: one deadline shared by
  // the waits for several peers in turn (a worker's for each of its ps tasks). The wait ends at
  // started + timeout and its give-up line states `timeout`, the span the user set, rather than
  // whatever the earlier peers left of it. nullopt: now.
  std::optional<std::chrono::steady_clock::time_point> started;
  // How often a wait still under way says so (the first line once this much has passed; never
  // where not positive); tests make it small.
  std::chrono::milliseconds report_interval{10'000};
  // Gets each "still waiting for ..." line; may be empty (nothing is said).
  std::function<void(const std::string&)> report;
  // A stop requested (a signal) ends the wait with StopRequested; may be null.
  const StopRequest* stop = nullptr;
  // Where set and returning a reason, the wait is pointless (the peer was refused for good, say):
  // it ends at once with a TransportError giving that reason. May be empty.
  std::function<std::string()> abandon;
};

// Not thread-safe: one retry loop drives it.
class PeerWait {
 public:
  using Clock = std::chrono::steady_clock;

  explicit PeerWait(PeerWaitOptions options);

  Clock::time_point deadline() const { return deadline_; }
  const PeerWaitOptions& options() const { return options_; }
  // Throws StopRequested if a stop has been requested, or TransportError if the wait is abandoned.
  void check_stop() const;
  // Records an attempt that failed with `error`.
  void failed(std::string error);
  // Waits out the backoff before the next attempt (50 ms, doubling to 1 s), saying so when a
  // report is due. Returns false, at once, where the next attempt would start after the deadline:
  // the caller gives up. Throws StopRequested as soon as a stop is requested.
  bool pause();
  // Throws TransportError "could not <verb> <peer> at <address> within T s (N attempts): <last
  // error>"; from then on gave_up() is true, so that an outer retry loop sharing this wait lets it
  // through instead of retrying.
  [[noreturn]] void give_up();
  bool gave_up() const { return gave_up_; }

 private:
  void report_if_due(Clock::time_point now);

  const PeerWaitOptions options_;
  const Clock::time_point start_;
  const Clock::time_point deadline_;
  Clock::time_point next_report_;
  Clock::duration backoff_;
  std::string last_error_;
  int attempts_ = 0;
  bool gave_up_ = false;
};

}  // namespace dtrain
