// Tasks as threads: the composition of plan/run.cc, for ranks that share this process and its
// data.
#include "plan/in_process_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <exception>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "base/cpu.h"
#include "base/error.h"
#include "cluster/cluster_secret.h"
#include "cluster/free_ports.h"
#include "cluster/local_launcher.h"
#include "collective/memory_ring.h"
#include "plan/cluster_configs.h"
#include "plan/flags.h"
#include "train/local_strategy.h"
#include "train/ps_strategy.h"
#include "train/ps_task_server.h"
#include "train/training_loop.h"

namespace dtrain {
namespace {

// Flags that choose where data or tasks come from: here the caller's arrays and threads do.
constexpr std::string_view kForeignHere[] = {
    "--train_data", "--test_data",    "--data_dir",    "--shuffle_buffer", "--validation_size",
    "--ps_hosts",   "--worker_hosts", "--job_name",    "--task_index",     "--cluster",
    "--rendezvous", "--max_restarts", "--secret_file", "--min_workers",    "--max_workers",
    "--join",       "--elastic_batch"};

void refuse_foreign_flags(const RunPlan& plan) {
  for (std::string_view flag : kForeignHere) {
    if (!plan.has(flag)) continue;
    throw UsageError(fmt::format(
        "{}: means nothing to a run in this process, whose data are the arrays it is given "
        "(and validation_data) and whose tasks are its threads; leave it out",
        flag.substr(2)));
  }
}

// What one task did: its lines, and how it failed.
struct TaskOutcome {
  std::ostringstream out;
  std::exception_ptr error;
};

// The first task's failure, with what it printed; a task stopped by the others' failure
// (StopRequested) only when none failed on its own.
void rethrow_first_failure(std::vector<TaskOutcome>& tasks) {
  std::exception_ptr first;
  for (TaskOutcome& task : tasks) {
    if (!task.error) continue;
    try {
      std::rethrow_exception(task.error);
    } catch (const StopRequested&) {
      if (!first) first = task.error;
    } catch (...) {
      std::rethrow_exception(task.error);
    }
  }
  if (first) std::rethrow_exception(first);
}

// Each worker's training settings: the plan's, with the threads of this machine shared between
// the workers unless the plan says how many, and the run's control of the plan's owner.
TrainConfig worker_config(const RunPlan& plan, int workers, RunControl* control) {
  TrainConfig config = plan.config;
  if (!plan.has("--threads")) config.threads = std::max(1, available_cores() / workers);
  config.control = control;
  return config;
}

// The owner's orders, every worker's: a control for the run in `storage`, where the plan has an
// owner; null otherwise.
RunControl* control_for(const RunPlan& plan, bool lockstep, std::optional<RunControl>& storage) {
  if (plan.config.owner == nullptr) return nullptr;
  return &storage.emplace(*plan.config.owner, lockstep);
}

InProcessResult run_local(const RunPlan& plan, const TrainingInput& input, std::ostream& out) {
  std::optional<RunControl> control;
  TrainConfig config = plan.config;
  config.control = control_for(plan, /*lockstep=*/true, control);
  TrainingState state(config);
  LocalStrategy strategy(config);
  InProcessResult run;
  run.result = run_training_loop(config, input, state, strategy, out);
  run.state = state.snapshot(config);
  return run;
}

InProcessResult run_allreduce(const RunPlan& plan, const TrainingInput& input, std::ostream& out) {
  const int workers = plan.flags.workers;
  std::optional<RunControl> control;
  const TrainConfig config =
      worker_config(plan, workers, control_for(plan, /*lockstep=*/true, control));
  // The ranks' names; nothing listens at these addresses.
  std::vector<HostPort> addresses;
  for (int r = 0; r < workers; ++r)
    addresses.push_back({"127.0.0.1", static_cast<uint16_t>(r + 1)});
  const ClusterSpec cluster({{std::string(kWorkerJob), addresses}});
  MemoryRing ring(workers, plan.flags.collective_timeout * 1000);
  std::vector<std::unique_ptr<RingConnector>> connectors;
  for (int r = 0; r < workers; ++r) connectors.push_back(ring.connector(r));
  std::vector<TaskOutcome> tasks(static_cast<size_t>(workers));
  InProcessResult run;
  {
    std::vector<std::jthread> threads;
    for (int rank = 0; rank < workers; ++rank) {
      threads.emplace_back([&, rank] {
        TaskOutcome& task = tasks[static_cast<size_t>(rank)];
        std::ostream& task_out = rank == 0 ? out : task.out;
        try {
          const AllreduceClusterConfig c =
              allreduce_config(plan, {.cluster = cluster, .task = {std::string(kWorkerJob), rank}},
                               /*secret=*/"");
          TrainingState state(config);
          AllreduceStrategy strategy(config, c, state, input,
                                     std::move(connectors[static_cast<size_t>(rank)]), task_out);
          try {
            const TrainResult result = run_training_loop(config, input, state, strategy, task_out);
            if (rank == 0) run = {result, state.snapshot(config)};
          } catch (const std::exception& error) {
            strategy.abort(error.what());
            throw;
          }
        } catch (...) {
          task.error = std::current_exception();
        }
      });
    }
  }
  rethrow_first_failure(tasks);
  return run;
}

InProcessResult run_ps(const RunPlan& plan, StrategyKind kind, const TrainingInput& input,
                       std::ostream& out) {
  const int ps = plan.flags.ps;
  const int workers = plan.flags.workers;
  // Sync workers run every global step together; async ones each at their own pace.
  std::optional<RunControl> control;
  const TrainConfig config = worker_config(
      plan, workers, control_for(plan, /*lockstep=*/kind == StrategyKind::kSync, control));
  const std::vector<uint16_t> ports = pick_free_ports(ps + workers);
  std::vector<HostPort> ps_hosts, worker_hosts;
  for (int i = 0; i < ps; ++i) ps_hosts.push_back({"127.0.0.1", ports[static_cast<size_t>(i)]});
  for (int i = 0; i < workers; ++i)
    worker_hosts.push_back({"127.0.0.1", ports[static_cast<size_t>(ps + i)]});
  const ClusterSpec cluster(
      {{std::string(kPsJob), ps_hosts}, {std::string(kWorkerJob), worker_hosts}});
  const std::string secret = new_cluster_secret();
  auto task_config = [&](std::string_view job, int index) {
    return ps_config(
        plan, kind,
        {.cluster = cluster, .task = {std::string(job), index}, .bind_host = "127.0.0.1"}, secret);
  };
  // A worker that fails, or the end of every worker, stops the ps tasks; the caller's stop
  // request stops the workers, and the ps tasks once the workers have left.
  StopRequest ps_stop;
  TrainConfig ps_train = config;
  ps_train.stop = &ps_stop;
  ps_train.observer = nullptr;
  ps_train.control = nullptr;
  // The tasks keep references to their settings.
  std::vector<PsClusterConfig> ps_configs, worker_configs;
  for (int i = 0; i < ps; ++i) ps_configs.push_back(task_config(kPsJob, i));
  for (int i = 0; i < workers; ++i) worker_configs.push_back(task_config(kWorkerJob, i));
  std::vector<TaskOutcome> ps_tasks(static_cast<size_t>(ps));
  std::vector<std::unique_ptr<PsTaskServer>> servers;
  for (int i = 0; i < ps; ++i) {
    servers.push_back(std::make_unique<PsTaskServer>(ps_train, ps_configs[static_cast<size_t>(i)],
                                                     ps_tasks[static_cast<size_t>(i)].out));
  }
  std::vector<TaskOutcome> tasks(static_cast<size_t>(workers));
  InProcessResult run;
  {
    std::vector<std::jthread> ps_threads;
    for (int i = 0; i < ps; ++i) {
      ps_threads.emplace_back([&, i] {
        try {
          servers[static_cast<size_t>(i)]->serve();
        } catch (...) {
          ps_tasks[static_cast<size_t>(i)].error = std::current_exception();
        }
      });
    }
    {
      std::vector<std::jthread> worker_threads;
      for (int rank = 0; rank < workers; ++rank) {
        worker_threads.emplace_back([&, rank] {
          TaskOutcome& task = tasks[static_cast<size_t>(rank)];
          std::ostream& task_out = rank == 0 ? out : task.out;
          try {
            TrainingState state(config);
            PsStrategy strategy(config, worker_configs[static_cast<size_t>(rank)], state, task_out);
            const TrainResult result = run_training_loop(config, input, state, strategy, task_out);
            if (rank == 0) run = {result, state.snapshot(config)};
          } catch (...) {
            task.error = std::current_exception();
            ps_stop.request(SIGTERM);
          }
        });
      }
    }
    ps_stop.request(SIGTERM);
  }
  rethrow_first_failure(tasks);
  rethrow_first_failure(ps_tasks);
  return run;
}

}  // namespace

InProcessResult run_plan_in_process(const RunPlan& plan, const InMemoryData& data,
                                    std::ostream& out) {
  refuse_foreign_flags(plan);
  refuse_flags_foreign_to(plan, plan.strategy);
  if (is_distributed(plan.strategy)) {
    check_flags(plan, CheckWhen::kLocalLauncher, plan.strategy);
    check_flags(plan, CheckWhen::kUnderItsStrategies, plan.strategy, plan.flags.workers);
  }
  const TrainingInput input(data.train, data.validation, data.test);
  RunPlan planned = plan;  // with the global batch its checkpoints record
  planned.config.global_batch =
      global_batch_of(plan, plan.strategy, is_distributed(plan.strategy) ? plan.flags.workers : 1);
  switch (plan.strategy) {
    case StrategyKind::kAllreduce:
      return run_allreduce(planned, input, out);
    case StrategyKind::kAsync:
    case StrategyKind::kSync:
      return run_ps(planned, plan.strategy, input, out);
    default:
      return run_local(planned, input, out);
  }
}

}  // namespace dtrain
