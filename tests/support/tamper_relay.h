// A forwarder on loopback that rewrites what it carries, as an attacker on the network path who
// does not hold the cluster secret would: it passes the handshake through, then, by its Attack,
// negates the gradient of every push a worker sends (recomputing the frame's CRC32C), or replaces
// one frame, once in the relay's life, with a forged one of its choosing and junk tags. Tests put
// it between a worker and a ps to show that authenticated frames catch it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "support/forwarder.h"

namespace dtrain::testing {

enum class Attack {
  kNegatePushes,
  // The worker's 20th push becomes kWorkerDone(worker 0, finished) with 4 tensor bytes: had the
  // ps believed it, it would end the run early.
  kForgeDoneWithTensors,
  // The ps's 20th reply becomes kError("stop\x1b[2J") with 4 tensor bytes (so that the old
  // receiver handed its meta on before any tag was checked): had the worker believed it, it would
  // exit, printing the escape sequence.
  kForgeError,
  // The ps's challenge on the first connection becomes AUTH_FAILED (handshake frames carry only a
  // CRC, which the relay computes), and the connection is cut: had the worker believed it, it
  // would exit saying the cluster secret is wrong.
  kForgeAuthFailed,
  // Between two all-reduce ranks, the connecting rank's 3rd chunk becomes kRingAbort with text of
  // the relay's choosing and 4 tensor bytes: had the other rank believed it, it would stop and
  // print that text.
  kForgeRingAbort,
  // Between a worker and an elastic job's coordinator, the first view the coordinator sends
  // becomes kFailed("stop\x1b[2J"): had the worker believed it, it would exit saying the job
  // cannot go on, and print the escape sequence.
  kForgeMembershipView,
  // ps0's first reply to a worker identity claim is dropped and the connection cut, as a link
  // that fails at that moment would: ps0 then holds an identity for a joiner that never heard it.
  kCutClaimReply,
};

class TamperRelay {
 public:
  // Listens on a free loopback port and forwards each connection to `target`.
  explicit TamperRelay(uint16_t target, Attack attack = Attack::kNegatePushes);

  uint16_t port() const { return forwarder_->port(); }
  // Frames the relay altered or forged.
  int frames_tampered() const { return *tampered_; }

 private:
  std::shared_ptr<std::atomic<int>> tampered_ = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<std::atomic<bool>> forged_ = std::make_shared<std::atomic<bool>>(false);
  std::unique_ptr<Forwarder> forwarder_;  // last: its threads use everything above
};

}  // namespace dtrain::testing
