// Where a task's place in a cluster comes from (DESIGN.md §3), in this order: the tutorials' flags
// (--ps_hosts, --worker_hosts, --job_name, --task_index), TF_CONFIG, a --cluster file, and last a
// launcher that gives ranks rather than addresses (mpirun, srun, torchrun). The environment is
// passed in, so that tests need not set the process's own.
#pragma once

#include <optional>
#include <string>

#include "cluster/cluster_spec.h"
#include "cluster/launch_env.h"

namespace dtrain {

// The cluster flags as given; `*_given` says whether each was on the command line.
struct ClusterFlags {
  std::string ps_hosts, worker_hosts, job_name;
  int task_index = 0;
  std::string cluster_file;
  std::string rendezvous;
  bool ps_hosts_given = false, worker_hosts_given = false, job_name_given = false;
  bool rendezvous_given = false;
};

struct ClusterSource {
  // This task's place, from flags, TF_CONFIG or a file; nullopt when none of them gives one.
  std::optional<ClusterConfig> cluster;
  std::string source;  // which of them, for the task's first line
  // Else the launcher that gave this process a rank (its world may be of one task); the ranks
  // then meet at its rendezvous (cluster/rendezvous.h) to learn their addresses.
  std::optional<LaunchEnv> launcher;
};

// Throws UsageError naming the flag or variable at fault: cluster flags without --job_name, a
// malformed spec (cluster/cluster_spec.h), a launcher's bad variables (cluster/launch_env.h), or
// --rendezvous where no launcher gives a rank or the place comes from elsewhere.
ClusterSource find_cluster_source(const ClusterFlags& flags, const EnvLookup& env);

}  // namespace dtrain
