// How another thread stops a ring's waits (issue 35, elastic membership): the job's membership has
// changed, so a ring formed for an older view of it can no longer complete its collective and
// must not wait for a neighbour that is gone or that has itself moved on. The membership client
// raises it when the job's coordinator announces a new view; every wait of a ring formed for an
// older view — a chunk, a send, the ring's formation — then ends with a CollectiveError at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace dtrain {

// Thread-safety: raise(), raised() and why() from any thread; fd() and rearm() from the one
// thread that waits (the ring's).
class RingInterrupt {
 public:
  RingInterrupt();  // throws TransportError if it cannot make its eventfd
  ~RingInterrupt();
  RingInterrupt(const RingInterrupt&) = delete;
  RingInterrupt& operator=(const RingInterrupt&) = delete;

  // Rings formed for views before `view` stop waiting; `why` is their error's message.
  void raise(uint64_t view, const std::string& why);
  // The newest view raised, 0 if none.
  uint64_t raised() const { return raised_.load(std::memory_order_acquire); }
  std::string why() const;

  // Readable after a raise() since the last rearm(): what a sleeping ring polls beside its
  // sockets. A ring rearms it before it first waits, then checks raised() after every wake-up.
  int fd() const { return fd_; }
  void rearm();

 private:
  int fd_ = -1;
  std::atomic<uint64_t> raised_{0};
  mutable std::mutex mutex_;
  std::string why_;
};

}  // namespace dtrain
