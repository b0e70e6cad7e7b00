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
  if (config.fusion_bytes != 0 && config.fusion_bytes < sizeof(float)) {
    throw UsageError(
        fmt::format("--fusion_bytes {}: must be 0 (one buffer) or at least {} (one float)",
                    config.fusion_bytes, sizeof(float)));
  }
  if (config.collective_timeout_ms < 1000) {
    throw UsageError(fmt::format("--collective_timeout {} ms: must be at least 1 s",
                                 config.collective_timeout_ms));
  }
}

}  // namespace

int run_allreduce_task(const TrainConfig& train, const AllreduceClusterConfig& config,
                       std::ostream& out) {
  validate_train_config(train);
  validate(config);
  if (worker_rank(config.cluster.cluster, config.cluster.task) < 0) {
    throw UsageError(
        fmt::format("task {} does not train; the allreduce strategy runs worker and chief tasks",
                    config.cluster.task.to_string()));
  }
  const TrainingInput input(train);
  TrainingState state(train);
  AllreduceStrategy strategy(train, config, state, input, tcp_ring_connector(), out);
  try {
    const TrainResult result = run_training_loop(train, input, state, strategy, out);
    return result.halt_signal != 0 ? 128 + result.halt_signal : 0;
  } catch (const StopRequested& stopped) {
    strategy.abort(stopped.what());
    fmt::print(out, "{}{}: {}\n", config.cluster.task.job, config.cluster.task.index,
               stopped.what());
    out << std::flush;
    return 128 + stopped.signal();
  } catch (const std::exception& error) {
    strategy.abort(error.what());
    throw;
  }
}

}  // namespace dtrain
