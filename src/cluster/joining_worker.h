// Where a worker that joins a running job alone runs (`dtrain task --join`): the only worker of a
// cluster of its own, listening on a free port of the address this host reaches the job from.
#pragma once

#include <vector>

#include "cluster/cluster_spec.h"

namespace dtrain {

// The cluster of a worker that joins the job reached at `job` (its coordinator, or an async job's
// ps0), with the job's ps tasks where it trains against them. Throws TransportError when this host
// has no address toward `job`.
ClusterConfig joining_worker_cluster(const HostPort& job, std::vector<HostPort> ps_tasks = {});

}  // namespace dtrain
