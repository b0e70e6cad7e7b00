// A TCP forwarder on loopback that cuts its connections on purpose: tests put it between a worker
// and a ps so that real connections break at chosen moments, with both processes alive.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "support/forwarder.h"

namespace dtrain::testing {

class CutProxy {
 public:
  // Which way the bytes counted toward a cut go.
  enum class Counting { kFromTarget, kToTarget };
  // Listens on a free loopback port and forwards each connection to `target`. On each
  // connection, once more than next_cut() bytes have gone the way `counting` says (by default,
  // back from the target), the bytes that crossed that mark are dropped and both sides closed;
  // next_cut() is asked again for each connection, and returns 0 for "never".
  CutProxy(uint16_t target, std::function<uint64_t()> next_cut,
           Counting counting = Counting::kFromTarget);

  uint16_t port() const { return forwarder_->port(); }
  int cuts() const { return *cuts_; }

 private:
  std::function<uint64_t()> next_cut_;  // called on the accepting thread only
  const Counting counting_;
  std::shared_ptr<std::atomic<int>> cuts_ = std::make_shared<std::atomic<int>>(0);
  std::unique_ptr<Forwarder> forwarder_;  // last: its threads use everything above
};

}  // namespace dtrain::testing
