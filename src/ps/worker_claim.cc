// The claim of a joining worker's identity: one request on a connection of its own.
#include "ps/worker_claim.h"

#include <fmt/format.h>

#include <chrono>

#include "base/error.h"
#include "ps/ps_lane.h"
#include "ps/ps_protocol.h"

namespace dtrain {

ClaimedWorker claim_worker(const PsClientOptions& options, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  PsLane lane(0, connect_to_ps_retrying(options, 0, deadline));
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

}  // namespace dtrain
