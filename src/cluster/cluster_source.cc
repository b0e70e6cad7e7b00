// The precedence of the cluster's sources.
#include "cluster/cluster_source.h"

#include <fmt/format.h>

#include "base/error.h"

namespace dtrain {
namespace {

// The flags, TF_CONFIG or a file; sets `source` to which.
std::optional<ClusterConfig> described_cluster(const ClusterFlags& f, const EnvLookup& env,
                                               std::string& source) {
  if (f.ps_hosts_given || f.worker_hosts_given || f.job_name_given) {
    if (!f.job_name_given) {
      throw UsageError("--ps_hosts/--worker_hosts need --job_name (ps or worker) and --task_index");
    }
    if (!f.cluster_file.empty() && !f.worker_hosts_given) {
      source = "--cluster " + f.cluster_file + " and --job_name/--task_index";
      return cluster_from_file(f.cluster_file, TaskId{f.job_name, f.task_index});
    }
    source = "--ps_hosts/--worker_hosts/--job_name/--task_index";
    return cluster_from_flags(f.ps_hosts, f.worker_hosts, f.job_name, f.task_index);
  }
  if (const std::optional<std::string> tf_config = env("TF_CONFIG");
      tf_config && !tf_config->empty()) {
    source = "TF_CONFIG";
    return cluster_from_tf_config(*tf_config);
  }
  if (!f.cluster_file.empty()) {
    source = "--cluster " + f.cluster_file;
    return cluster_from_file(f.cluster_file);
  }
  return std::nullopt;
}

}  // namespace

ClusterSource find_cluster_source(const ClusterFlags& flags, const EnvLookup& env) {
  ClusterSource found;
  found.cluster = described_cluster(flags, env, found.source);
  if (found.cluster) {
    if (flags.rendezvous_given) {
      throw UsageError(fmt::format(
          "--rendezvous: this task's place comes from {}; the rendezvous is for tasks that "
          "mpirun, srun or torchrun-style variables start with a rank only; leave it out",
          found.source));
    }
    return found;
  }
  found.launcher = launch_env_from(env, flags.rendezvous);
  if (!found.launcher && flags.rendezvous_given) {
    throw UsageError(
        "--rendezvous: no launcher gives this task a rank (OMPI_COMM_WORLD_RANK, PMI_RANK, "
        "SLURM_PROCID or RANK); start it with mpirun, srun or torchrun-style variables");
  }
  return found;
}

}  // namespace dtrain
