// The embedded default (DESIGN.md §3): `dtrain train --strategy async|sync|allreduce` without a
// cluster spec starts the whole cluster on this machine, as child processes of this binary.
#pragma once

#include <ostream>

#include "plan/run.h"
#include "plan/run_plan.h"

namespace dtrain {

// Starts --ps ps tasks (the ps strategies; none for allreduce) and --workers workers on loopback,
// each running `dtrain task` with the plan's arguments and its place in the cluster, relays their
// output to out, and returns the first failed task's exit code (0 if none failed). Throws
// UsageError, before starting anything, for a value the whole cluster would refuse.
// REQUIRES: is_distributed(plan.strategy).
int launch_local_cluster(const RunPlan& plan, const RunEnvironment& environment, std::ostream& out);

}  // namespace dtrain
