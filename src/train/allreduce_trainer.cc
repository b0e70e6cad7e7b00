// The allreduce worker process: checks its cluster flags, loads its data and runs the training loop
// over an AllreduceStrategy whose ring forms over TCP; a failure is passed to the other workers.
#include "train/allreduce_trainer.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <exception>

#include "base/error.h"
#include "collective/ring_connector.h"
#include "train/training_input.h"
#include "train/training_loop.h"
#include "train/training_state.h"

namespace dtrain {
namespace {

void validate(const AllreduceClusterConfig& config) {
  if (config.secret.empty()) {
    throw UsageError(
        "no cluster secret: set DTRAIN_SECRET or give --secret_file (every worker of the cluster "
        "needs the same one)");
  }
  if (!config.cluster.cluster.tasks(kPsJob).empty()) {
    throw UsageError(fmt::format(
        "the allreduce strategy takes a cluster of workers only, but this one has {} ps tasks; "
        "leave out --ps_hosts (or the \"ps\" job), or use --strategy async|sync",
        config.cluster.cluster.num_tasks(kPsJob)));
  }
}

}  // namespace

void begin_allreduce_task(const AllreduceClusterConfig& config) {
  validate(config);
  if (worker_rank(config.cluster.cluster, config.cluster.task) < 0) {
    throw UsageError(
        fmt::format("task {} does not train; the allreduce strategy runs worker and chief tasks",
                    config.cluster.task.to_string()));
  }
}

TaskStrategy make_allreduce_strategy(const TrainConfig& train, const AllreduceClusterConfig& config,
                                     TrainingState& state, const TrainingInput& input,
                                     std::ostream& out) {
  auto strategy =
      std::make_unique<AllreduceStrategy>(train, config, state, input, tcp_ring_connector(), out);
  AllreduceStrategy* worker = strategy.get();
  auto abort = [worker](const std::exception& why) { worker->abort(why.what()); };
  return {std::move(strategy), abort};
}

}  // namespace dtrain
