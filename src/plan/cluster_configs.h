// What a task of a cluster takes from the run plan beside its training settings: the all-reduce
// ring's and the ps strategies' settings, the same for a task of its own process (plan/run.h) and
// for ranks in threads of one process (plan/in_process_run.h).
#pragma once

#include <set>
#include <string>

#include "plan/run_plan.h"
#include "train/allreduce_strategy.h"
#include "train/ps_cluster_config.h"

namespace dtrain {

// `secret`: the cluster secret, raw bytes.
AllreduceClusterConfig allreduce_config(const RunPlan& plan, ClusterConfig cluster,
                                        std::string secret);
// kind: async or sync.
PsClusterConfig ps_config(const RunPlan& plan, StrategyKind kind, ClusterConfig cluster,
                          std::string secret);
// A ps task's, from its command line: it learns the rest of what the job trains from the chief
// unless these name a model (PsClusterConfig::given_flags).
std::set<std::string> given_job_setting_flags(const RunPlan& plan);

}  // namespace dtrain
