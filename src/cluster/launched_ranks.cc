// The rendezvous of a launcher's ranks, and the elastic coordinator's place among them.
#include "cluster/launched_ranks.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <utility>
#include <vector>

#include "base/error.h"
#include "cluster/bind_address.h"

namespace dtrain {

LaunchedRanks meet_launched_ranks(RendezvousOptions options, int ps,
                                  const std::optional<ElasticBounds>& elastic, std::string_view who,
                                  std::ostream& out) {
  // The coordinator listens where the rendezvous does, so that every rank reaches it alike.
  const std::string coordinator_host = bind_address_for(options.address, options.bind).host;
  if (elastic && options.rank == 0) options.coordinator_port = free_port_on(coordinator_host);
  uint16_t coordinator_port = 0;
  const std::vector<HostPort> ranks = rendezvous(options, &coordinator_port);
  LaunchedRanks launched;
  launched.config = cluster_of_ranks(ranks, options.rank, ps);
  launched.ranks_on_host = ranks_on_host_of(ranks, options.rank);
  if (elastic) {
    if (coordinator_port == 0) {
      throw UsageError(fmt::format(
          "--min_workers: rank 0 (at {}) started no coordinator for an elastic job; give every "
          "rank the same flags",
          options.address.to_string()));
    }
    launched.coordinator = HostPort{options.address.host, coordinator_port};
    if (options.rank == 0) {
      launched.coordinator_service = std::make_unique<MembershipService>(MembershipOptions{
          .bind_host = coordinator_host,
          .port = coordinator_port,
          .secret = options.secret,
          .authenticate_frames = options.authenticate_frames,
          .tcp_congestion = options.tcp_congestion,
          .workers = options.world_size,
          .min_workers = elastic->min_workers,
          .max_workers = elastic->max_workers > 0 ? elastic->max_workers : options.world_size,
          .timeout_ms = elastic->timeout_ms});
      fmt::print(out, "{}: elastic: the job's coordinator at {}:{} (in rank 0's process)\n", who,
                 coordinator_host, coordinator_port);
    }
  }
  fmt::print(out, "{}: rank {} is {} of {}\n", who, options.rank, launched.config.task.to_string(),
             launched.config.cluster.to_string());
  out << std::flush;
  return launched;
}

}  // namespace dtrain
