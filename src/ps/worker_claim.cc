// The claim of a joining worker's identity: one request on a connection of its own, asked again
// on a new connection when the reply does not come whole.
#include "ps/worker_claim.h"

#include <fmt/format.h>

#include <chrono>

#include "base/error.h"
#include "comm/peer_wait.h"
#include "ps/ps_lane.h"
#include "ps/ps_protocol.h"

namespace dtrain {
namespace {

ClaimedWorker ask(PsLane& lane) {
  lane.connection->send(ps_protocol::kClaimWorker, 1, {}, {});
  const Connection::Incoming in = lane.expect(ps_protocol::kClaimReply);
  ps_protocol::MetaReader r(in.meta);
  ClaimedWorker claimed;
  try {
    claimed.worker = r.get<int32_t>();
    claimed.job_workers = r.get<int32_t>();
  } catch (const ps_protocol::ShortMeta& error) {
    throw FrameError(
        fmt::format("bad claim reply from {}: {}", lane.connection->peer(), error.what()));
  }
  claimed.ps_hosts = r.rest_as_peer_text();
  if (claimed.worker < 0 || claimed.job_workers < 1 || claimed.ps_hosts.empty()) {
    throw FrameError(fmt::format("bad claim reply from {}: worker {} of a job of {} workers",
                                 lane.connection->peer(), claimed.worker, claimed.job_workers));
  }
  return claimed;
}

}  // namespace

ClaimedWorker claim_worker(const PsClientOptions& options, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  // A reply cut on the way is transient: asked again, ps0 answers with the identity it already
  // holds for this process (one claim per process), not a second one.
  PeerWait wait = ps_wait(options, 0, deadline, "claim a worker identity from");
  ClaimedWorker claimed;
  retry_connection(wait, [&] {
    PsLane lane(0, connect_to_ps(options, 0, wait));
    claimed = ask(lane);
  });
  return claimed;
}

}  // namespace dtrain
