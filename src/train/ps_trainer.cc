// The ps strategies' tasks: a ps task's server (train/ps_task_server.h), or a worker running the
// training loop with the ps strategy (train/ps_strategy.h).
#include "train/ps_trainer.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "base/error.h"
#include "tensor/blas.h"
#include "train/ps_strategy.h"
#include "train/ps_task_server.h"
#include "train/training_input.h"
#include "train/training_loop.h"
#include "train/training_state.h"

namespace dtrain {

int run_ps_task(const TrainConfig& train, const PsClusterConfig& config, std::ostream& out) {
  if (config.secret.empty()) {
    throw UsageError(
        "no cluster secret: set DTRAIN_SECRET or give --secret_file (every task of the cluster "
        "needs the same one)");
  }
  const TaskId& task = config.cluster.task;
  if (config.cluster.cluster.tasks("ps").empty()) {
    throw UsageError("the ps strategies need at least one ps task (--ps_hosts, or a \"ps\" job)");
  }
  validate_train_config(train);
  blas_set_threads(1);
  if (task.job == "ps") return PsTaskServer(train, config, out).serve();
  if (worker_rank(config.cluster.cluster, task) < 0) {
    throw UsageError(
        fmt::format("task {} does not train; the ps strategies run ps, worker and "
                    "chief tasks",
                    task.to_string()));
  }
  const TrainingInput input(train);
  TrainingState state(train);
  PsStrategy strategy(train, config, state, out);
  try {
    const TrainResult result = run_training_loop(train, input, state, strategy, out);
    return result.halt_signal != 0 ? 128 + result.halt_signal : 0;
  } catch (const StopRequested& stopped) {
    fmt::print(out, "{}{}: {}\n", task.job, task.index, stopped.what());
    out << std::flush;
    return 128 + stopped.signal();
  } catch (const Error& error) {
    strategy.report_failure(error.what());
    throw;
  }
}

}  // namespace dtrain
