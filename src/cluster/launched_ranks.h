// Where the tasks of a launcher that gives ranks rather than addresses (mpirun, srun, torchrun)
// run: the ranks meet at the rendezvous (cluster/rendezvous.h), the first `ps` of them become the
// ps tasks, and an elastic all-reduce job's coordinator is placed in rank 0's process, on a port of
// the rendezvous host that rank 0 announces with the addresses (docs/elastic.md).
#pragma once

#include <memory>
#include <optional>
#include <ostream>
#include <string_view>

#include "cluster/cluster_spec.h"
#include "cluster/membership_service.h"
#include "cluster/rendezvous.h"

namespace dtrain {

struct LaunchedRanks {
  ClusterConfig config;
  int ranks_on_host = 1;  // the ranks that split this host's cores
  // An elastic job: where its coordinator listens, and on rank 0 the coordinator itself, which
  // must live for the whole run.
  std::optional<HostPort> coordinator;
  std::unique_ptr<MembershipService> coordinator_service;
};

// An elastic all-reduce job's bounds, as validated by their flags' rows (plan/).
struct ElasticBounds {
  int min_workers = 1;
  int max_workers = 0;      // 0: the world's size
  int timeout_ms = 60'000;  // the coordinator's wait for a view (--collective_timeout)
};

// Meets the other ranks as `options` says, with `ps` ps tasks; `elastic` (all-reduce, no ps
// tasks) places the job's coordinator. Says what it placed on `out`, as `who` ("dtrain task").
// Throws what rendezvous() throws, and UsageError when rank 0 started no coordinator for an
// elastic job (its flags differ).
LaunchedRanks meet_launched_ranks(RendezvousOptions options, int ps,
                                  const std::optional<ElasticBounds>& elastic, std::string_view who,
                                  std::ostream& out);

}  // namespace dtrain
