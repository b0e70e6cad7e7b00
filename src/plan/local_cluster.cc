// The local launcher's cluster: ports, the tasks' command lines, and the launch.
#include "plan/local_cluster.h"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <optional>
#include <utility>

#include "base/cpu.h"
#include "cluster/cluster_secret.h"
#include "cluster/free_ports.h"
#include "cluster/local_launcher.h"
#include "cluster/membership_service.h"
#include "plan/flags.h"

namespace dtrain {
namespace {

bool is_named(std::string_view arg, std::string_view name) {
  return arg == name ||
         (arg.starts_with(name) && arg.size() > name.size() && arg[name.size()] == '=');
}

// The user's arguments less those that choose the launch (--strategy and the launcher's own
// flags, with their values) and --resume/--overwrite, which this process has acted on.
std::vector<std::string> task_arguments(const std::vector<std::string>& args) {
  // --metrics_port: each task is given its own (launch_local_cluster).
  std::vector<std::string_view> with_value = {"--strategy", "--metrics_port"};
  for (const FlagSpec& flag : flag_table()) {
    if (flag.launcher_only) with_value.push_back(flag.name);
  }
  std::vector<std::string> kept;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (std::find(with_value.begin(), with_value.end(), arg) != with_value.end()) {
      ++i;  // its value
      continue;
    }
    const bool dropped =
        std::any_of(with_value.begin(), with_value.end(),
                    [&](std::string_view name) { return is_named(arg, name) && arg != name; }) ||
        is_named(arg, "--resume") || is_named(arg, "--overwrite");
    if (!dropped) kept.push_back(arg);
  }
  return kept;
}

// The tasks' listening sockets, closed here unless handed to run_local_cluster, which closes
// them itself once the tasks have started.
class TaskListeners {
 public:
  explicit TaskListeners(int n) : held_(hold_free_ports(n)) {}
  ~TaskListeners() {
    for (const HeldPort& h : held_) {
      if (h.fd >= 0) close(h.fd);
    }
  }
  TaskListeners(const TaskListeners&) = delete;
  TaskListeners& operator=(const TaskListeners&) = delete;

  uint16_t port(size_t i) const { return held_[i].port; }
  int hand_over(size_t i) { return std::exchange(held_[i].fd, -1); }

 private:
  std::vector<HeldPort> held_;
};

}  // namespace

int launch_local_cluster(const RunPlan& plan, const RunEnvironment& environment,
                         std::ostream& out) {
  const FlagValues& f = plan.flags;
  const bool allreduce = plan.strategy == StrategyKind::kAllreduce;
  const int ps = allreduce ? 0 : f.ps;
  check_flags(plan, CheckWhen::kLocalLauncher, plan.strategy);
  check_flags(plan, CheckWhen::kUnderItsStrategies, plan.strategy, f.workers);
  // Bound here and inherited by the tasks: no other process can take a port before its task
  // serves on it.
  TaskListeners listeners(ps + f.workers);
  auto hosts = [&](int first, int n) {
    std::vector<std::string> list;
    for (int i = 0; i < n; ++i) {
      list.push_back(fmt::format("localhost:{}", listeners.port(static_cast<size_t>(first + i))));
    }
    return fmt::format("{}", fmt::join(list, ","));
  };
  const std::string ps_hosts = hosts(0, ps);
  const std::string worker_hosts = hosts(ps, f.workers);
  // The user's flags, less those that choose the launch, go to every task.
  std::vector<std::string> common = {"task", "--local_task"};
  for (std::string& arg : task_arguments(plan.arguments)) common.push_back(std::move(arg));
  // This process settled --train_dir's checkpoint once for the cluster; a task restarted later
  // must resume from what the run saved since, never wipe it again.
  if (!f.train_dir.empty()) common.push_back("--resume");
  if (plan.strategy == StrategyKind::kSync) common.push_back("--sync_replicas");
  // A sync job's ps tasks count its workers (ps/worker_roster.h), and its workers report it.
  const bool elastic_sync = plan.strategy == StrategyKind::kSync && f.min_workers > 0;
  if (elastic_sync) common.insert(common.end(), {"--min_workers", std::to_string(f.min_workers)});
  // An async job's ps tasks take workers that join it, up to --max_workers.
  const bool joinable_async = plan.strategy == StrategyKind::kAsync && f.max_workers > f.workers;
  if (joinable_async) {
    common.insert(common.end(), {"--max_workers", std::to_string(f.max_workers)});
  }
  // Named again so that a task refuses a cluster with ps tasks rather than run async in it.
  if (allreduce) common.insert(common.end(), {"--strategy", "allreduce"});
  // The workers share this machine's cores unless told otherwise.
  if (!plan.has("--threads")) {
    common.insert(common.end(),
                  {"--threads", std::to_string(std::max(1, available_cores() / f.workers))});
  }
  // The chief's progress bar comes through its pipe, and the relay draws it on this terminal.
  if (environment.terminal && f.progress) common.push_back("--progress_through_launcher");
  if (ps > 0) common.insert(common.end(), {"--ps_hosts", ps_hosts});
  common.insert(common.end(), {"--worker_hosts", worker_hosts});

  std::vector<LocalTask> tasks;
  auto add = [&](const std::string& job, int index) {
    LocalTask task{fmt::format("{}{}", job, index), common};
    task.args.insert(task.args.end(), {"--job_name", job, "--task_index", std::to_string(index)});
    tasks.push_back(std::move(task));
  };
  for (int i = 0; i < ps; ++i) add("ps", i);
  for (int i = 0; i < f.workers; ++i) add("worker", i);
  // --metrics_port P: task i (the ps tasks first) serves on P + i; 0: each on a free port.
  if (f.metrics_port >= 0) {
    for (size_t i = 0; i < tasks.size(); ++i) {
      const int port = f.metrics_port == 0 ? 0 : f.metrics_port + static_cast<int>(i);
      if (port > 65535) {
        throw UsageError(fmt::format("--metrics_port {}: task {} would serve on port {}",
                                     f.metrics_port, tasks[i].name, port));
      }
      tasks[i].args.insert(tasks[i].args.end(), {"--metrics_port", std::to_string(port)});
    }
  }

  const std::string secret = new_cluster_secret();
  // An elastic job's coordinator lives here, where no worker's leaving can take it away.
  const bool elastic = allreduce && f.min_workers > 0;
  std::optional<MembershipService> coordinator;
  if (elastic) {
    // The tasks prove the secret of --secret_file when it is given (a worker started by hand can
    // then join), else the launcher's own.
    coordinator.emplace(
        MembershipOptions{.secret = f.secret_file.empty() ? secret : cluster_secret(f.secret_file),
                          .authenticate_frames = !f.unauthenticated_frames,
                          .tcp_congestion = f.tcp_congestion,
                          .workers = f.workers,
                          .min_workers = f.min_workers,
                          .max_workers = f.max_workers > 0 ? f.max_workers : f.workers,
                          .timeout_ms = f.collective_timeout * 1000});
    const std::string address = fmt::format("127.0.0.1:{}", coordinator->port());
    for (LocalTask& task : tasks) task.args.insert(task.args.end(), {"--join", address});
  }

  LaunchOptions options;
  options.binary = "/proc/self/exe";
  options.max_restarts = f.max_restarts;
  options.restart = elastic || elastic_sync ? RestartPolicy::kElastic
                    : allreduce             ? RestartPolicy::kGroup
                                            : RestartPolicy::kTask;
  // The tasks stop by themselves within the same time; SIGKILL is for one that cannot.
  options.grace = std::chrono::milliseconds(plan.config.shutdown_timeout_ms);
  options.extra_env.push_back("DTRAIN_SECRET=" + secret);
  options.terminal = environment.terminal;
  if (elastic) {
    fmt::print(out,
               "dtrain train: strategy allreduce, {} workers on this machine ({}), elastic: the "
               "job goes on while {} remain, up to {}; its coordinator at 127.0.0.1:{}\n",
               f.workers, worker_hosts, f.min_workers,
               f.max_workers > 0 ? f.max_workers : f.workers, coordinator->port());
  } else if (allreduce) {
    fmt::print(out, "dtrain train: strategy allreduce, {} workers on this machine ({})\n",
               f.workers, worker_hosts);
  } else {
    fmt::print(out,
               "dtrain train: strategy {}, {} ps and {} workers on this machine (ps {}, workers "
               "{})\n",
               strategy_name(plan.strategy), ps, f.workers, ps_hosts, worker_hosts);
    if (joinable_async) {
      fmt::print(out,
                 "dtrain train: up to {} workers in all: more join with dtrain task --strategy "
                 "async --join {} (ps0), the job's training flags and {}\n",
                 f.max_workers, hosts(0, 1),
                 f.secret_file.empty()
                     ? "secret (none can: this job's secret was made up for it; give it "
                       "--secret_file)"
                     : "--secret_file " + f.secret_file);
    }
  }
  for (size_t i = 0; i < static_cast<size_t>(ps + f.workers); ++i) {
    tasks[i].listen_fd = listeners.hand_over(i);
  }
  out << std::flush;
  const LaunchResult result = run_local_cluster(tasks, options, out);
  for (const std::string& line : result.failed) std::cerr << "dtrain: " << line << "\n";
  if (result.interrupted) std::cerr << "dtrain: interrupted; every task has been stopped\n";
  return result.exit_code;
}

}  // namespace dtrain
