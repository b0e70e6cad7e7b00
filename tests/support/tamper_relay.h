// A forwarder on loopback that rewrites what it carries, as an attacker on the network path who
// does not hold the cluster secret would: it passes the handshake through, then negates the
// gradient of every push a worker sends and recomputes the frame's CRC32C. Tests put it
// between a worker and a ps to show that authenticated frames catch it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "support/forwarder.h"

namespace dtrain::testing {

class TamperRelay {
 public:
  // Listens on a free loopback port and forwards each connection to `target`.
  explicit TamperRelay(uint16_t target);

  uint16_t port() const { return forwarder_->port(); }
  int pushes_rewritten() const { return *rewritten_; }

 private:
  std::shared_ptr<std::atomic<int>> rewritten_ = std::make_shared<std::atomic<int>>(0);
  std::unique_ptr<Forwarder> forwarder_;  // last: its threads use everything above
};

}  // namespace dtrain::testing
