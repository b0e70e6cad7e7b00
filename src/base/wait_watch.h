// --stall_warning for a thread that waits on several peers at once by blocking (a ps worker's
// push and pull, answered by every ps task): a watchdog thread of its own says so when an
// operation has waited past the warning — which operation, for how long, and which peers have not
// answered — again at doubling intervals, and once more when it ends. The waiting thread pays a
// few atomic stores an operation; the watchdog wakes a few times a second to look.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dtrain {

class WaitWatch {
 public:
  // peers: the names of the peers an operation waits on ("ps0", "ps1"), by index. `why` ends each
  // report (what the peers wait for in turn, where that is known). Lines go to `report`.
  WaitWatch(std::chrono::milliseconds warning, std::vector<std::string> peers, std::string why,
            std::function<void(const std::string&)> report);
  ~WaitWatch();  // stops and joins the watchdog
  WaitWatch(const WaitWatch&) = delete;
  WaitWatch& operator=(const WaitWatch&) = delete;

  // The waiting thread: an operation (`what`, a literal: "push and pull") at global step `step`
  // begins, waiting on every peer; peer `index` has answered; the operation is over.
  void begin(const char* what, int64_t step);
  void answered(size_t peer) { pending_[peer].store(false, std::memory_order_relaxed); }
  void end();

 private:
  void watch(std::stop_token stop);
  // One look: reports the operation under way if it is due, or the end of one reported.
  void look(std::chrono::steady_clock::time_point now);
  std::string waited_for() const;

  const std::chrono::milliseconds warning_;
  const std::vector<std::string> peers_;
  const std::string why_;
  const std::function<void(const std::string&)> report_;

  // Written by the waiting thread, read by the watchdog.
  std::atomic<uint64_t> op_{0};  // counts operations begun
  std::atomic<bool> active_{false};
  std::atomic<int64_t> began_ns_{0};  // steady_clock
  std::atomic<int64_t> ended_ns_{0};
  std::atomic<const char*> what_{""};
  std::atomic<int64_t> step_{0};
  std::unique_ptr<std::atomic<bool>[]> pending_;

  // The watchdog's own.
  uint64_t reported_op_ = 0;  // the operation last reported, when it began, and how often
  int64_t reported_began_ns_ = 0;
  int reports_ = 0;
  std::string reported_what_;
  std::mutex mutex_;
  std::condition_variable_any wake_;
  std::jthread thread_;  // last: runs on everything above
};

}  // namespace dtrain
