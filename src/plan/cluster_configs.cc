// The settings of one task of a cluster, from its run plan.
#include "plan/cluster_configs.h"

#include <fmt/format.h>

#include <cmath>
#include <string_view>

#include "comm/transport.h"
#include "ps/partition.h"
#include "train/ps_job_settings.h"

namespace dtrain {

AllreduceClusterConfig allreduce_config(const RunPlan& plan, ClusterConfig cluster,
                                        std::string secret) {
  const FlagValues& f = plan.flags;
  AllreduceClusterConfig c;
  c.cluster = std::move(cluster);
  c.secret = std::move(secret);
  c.fusion_bytes = f.fusion_bytes;
  c.collective_timeout_ms = f.collective_timeout * 1000;
  c.stall_warning_ms = static_cast<int>(std::lround(f.stall_warning * 1000));
  c.transport = parse_transport(f.transport);
  if (!f.join.empty()) c.coordinator = parse_host_port("--join", f.join);
  c.keep_global_batch = f.elastic_batch == "global";
  return c;
}

PsClusterConfig ps_config(const RunPlan& plan, StrategyKind kind, ClusterConfig cluster,
                          std::string secret) {
  const FlagValues& f = plan.flags;
  PsClusterConfig c;
  c.cluster = std::move(cluster);
  c.secret = std::move(secret);
  c.placement = parse_placement(f.placement);
  c.min_shard_bytes = f.min_shard_bytes;
  c.sync.sync_replicas = kind == StrategyKind::kSync;
  c.sync.replicas_to_aggregate = f.replicas_to_aggregate;
  c.sync.total_num_replicas = f.total_num_replicas;
  c.peer_timeout_ms = f.peer_timeout * 1000;
  c.stall_warning_ms = static_cast<int>(std::lround(f.stall_warning * 1000));
  c.worker_timeout_ms = f.worker_timeout * 1000;
  c.liveness_timeout_ms = f.liveness_timeout * 1000;
  c.on_worker_loss =
      f.on_worker_loss == "continue" ? WorkerLossPolicy::kContinue : WorkerLossPolicy::kStop;
  if (c.sync.sync_replicas) c.min_workers = f.min_workers;
  if (!c.sync.sync_replicas) c.max_workers = f.max_workers;
  c.transport = parse_transport(f.transport);
  if (c.cluster.task.job == kPsJob) c.given_flags = given_job_setting_flags(plan);
  return c;
}

std::set<std::string> given_job_setting_flags(const RunPlan& plan) {
  std::set<std::string> given;
  for (const std::string_view flag : ps_job_setting_flags()) {
    if (plan.has(fmt::format("--{}", flag))) given.emplace(flag);
  }
  return given;
}

}  // namespace dtrain
