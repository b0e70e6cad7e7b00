// A request that a run stop at its next step boundary, made by a signal (cli/shutdown.h: SIGTERM,
// SIGHUP, SIGINT) and read by the training loop and the ps. It is set from a signal handler, so
// it is one lock-free atomic and nothing else.
#pragma once

#include <string.h>

#include <atomic>
#include <string>

namespace dtrain {

class StopRequest {
 public:
  // Async-signal-safe.
  void request(int signal) noexcept { signal_.store(signal, std::memory_order_relaxed); }
  bool requested() const noexcept { return signal_.load(std::memory_order_relaxed) != 0; }
  // The signal that asked, 0 if none.
  int signal() const noexcept { return signal_.load(std::memory_order_relaxed); }

 private:
  static_assert(std::atomic<int>::is_always_lock_free);
  std::atomic<int> signal_{0};
};

// "SIGTERM" for 15.
inline std::string signal_name(int signal) {
  const char* abbreviation = sigabbrev_np(signal);
  return abbreviation != nullptr ? std::string("SIG") + abbreviation
                                 : "signal " + std::to_string(signal);
}

}  // namespace dtrain
