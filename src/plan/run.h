// The one composition root (DESIGN.md §2a): a run plan becomes a run. `dtrain train`, `dtrain
// task` and the local launcher's tasks all come here: the cluster's source is found, the flags
// foreign to the strategy refused, the checkpoint settled, and then the strategy the plan and the
// cluster choose runs the one training loop — or a ps task serves, or the local launcher starts
// the cluster's tasks.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include "base/stop_request.h"
#include "cluster/launch_env.h"
#include "plan/run_plan.h"

namespace dtrain {

// What a run takes from the process it runs in.
struct RunEnvironment {
  EnvLookup env = process_env();  // TF_CONFIG, a launcher's ranks, DTRAIN_SECRET
  bool terminal = false;          // out is a terminal: a progress bar may be drawn on it
  // Installs the handling of SIGTERM, SIGHUP and SIGINT for the task named `who`, for as long as
  // the request returned lives; a run stops at its next step once it is set. Empty: no signals.
  std::function<std::shared_ptr<const StopRequest>(std::chrono::milliseconds timeout,
                                                   const std::string& who)>
      handle_signals;
};

// Runs the plan, printing to out, and returns the process exit code: 0, or 128 + the signal that
// stopped the run, or the local launcher's code for the first task that failed. Throws UsageError
// naming the flag, variable or file at fault before anything starts; TransportError,
// CollectiveError or Error when the run fails.
int run_plan(const RunPlan& plan, const RunEnvironment& environment, std::ostream& out);

}  // namespace dtrain
