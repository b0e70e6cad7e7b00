// The ps strategies' tasks for the composition root (plan/run.h): the checks every task makes, a
// ps task's server (train/ps_task_server.h), and a worker's strategy (train/ps_strategy.h).
#include "train/ps_trainer.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "base/error.h"
#include "tensor/blas.h"
#include "train/ps_strategy.h"
#include "train/ps_task_server.h"
#include "train/training_state.h"

namespace dtrain {

bool begin_ps_task(const PsClusterConfig& config) {
  if (config.secret.empty()) {
    throw UsageError(
        "no cluster secret: set DTRAIN_SECRET or give --secret_file (every task of the cluster "
        "needs the same one)");
  }
  if (config.cluster.cluster.tasks("ps").empty()) {
    throw UsageError("the ps strategies need at least one ps task (--ps_hosts, or a \"ps\" job)");
  }
  blas_set_threads(1);
  const TaskId& task = config.cluster.task;
  if (task.job == "ps") return true;
  if (worker_rank(config.cluster.cluster, task) < 0) {
    throw UsageError(
        fmt::format("task {} does not train; the ps strategies run ps, worker and "
                    "chief tasks",
                    task.to_string()));
  }
  return false;
}

int run_ps_service(const TrainConfig& train, const PsClusterConfig& config, std::ostream& out) {
  return PsTaskServer(train, config, out).serve();
}

TaskStrategy make_ps_worker_strategy(const TrainConfig& train, const PsClusterConfig& config,
                                     TrainingState& state, std::ostream& out) {
  auto strategy = std::make_unique<PsStrategy>(train, config, state, out);
  PsStrategy* worker = strategy.get();
  // A signal is no failure: the ps tasks hear of it as the worker leaving.
  auto abort = [worker](const std::exception& why) {
    if (dynamic_cast<const Error*>(&why) != nullptr &&
        dynamic_cast<const StopRequested*>(&why) == nullptr) {
      worker->report_failure(why.what());
    }
  };
  return {std::move(strategy), abort};
}

}  // namespace dtrain
