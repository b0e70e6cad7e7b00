// A joining worker's cluster of one.
#include "cluster/joining_worker.h"

#include <string>
#include <utility>

#include "cluster/rendezvous.h"
#include "comm/local_address.h"

namespace dtrain {

ClusterConfig joining_worker_cluster(const HostPort& job, std::vector<HostPort> ps_tasks) {
  const std::string host = local_address_toward(job.host);
  ClusterSpec::JobMap jobs;
  if (!ps_tasks.empty()) jobs[std::string(kPsJob)] = std::move(ps_tasks);
  jobs[std::string(kWorkerJob)] = {HostPort{host, free_port_on(host)}};
  ClusterConfig cluster;
  cluster.cluster = ClusterSpec(std::move(jobs));
  cluster.task = TaskId{std::string(kWorkerJob), 0};
  return cluster;
}

}  // namespace dtrain
