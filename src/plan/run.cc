// The composition root: plan → cluster → strategy → the training loop → exit code.
#include "plan/run.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <optional>

#include "base/cpu.h"
#include "base/error.h"
#include "base/log.h"
#include "cluster/bind_address.h"
#include "cluster/cluster_secret.h"
#include "cluster/cluster_source.h"
#include "cluster/joining_worker.h"
#include "cluster/launched_ranks.h"
#include "cluster/membership_client.h"
#include "data/data_files.h"
#include "plan/cluster_configs.h"
#include "plan/flags.h"
#include "plan/local_cluster.h"
#include "ps/worker_claim.h"
#include "train/allreduce_trainer.h"
#include "train/local_strategy.h"
#include "train/ps_job_settings.h"
#include "train/ps_trainer.h"
#include "train/training_loop.h"

namespace dtrain {
namespace {

using StrategyFactory = std::function<TaskStrategy(TrainingState&, const TrainingInput&)>;

// The one loop of every strategy, and the one rule for its exit code: 128 + the signal that
// stopped it. A run that fails or is stopped tells its peers through the strategy's abort.
int train_with(const TrainConfig& config, const std::string& name, const StrategyFactory& make,
               std::ostream& out) {
  const TrainingInput input(config);
  TrainingState state(config);
  // A worker that comes to join a job that has finished (the launcher's restart of one lost near
  // the end) did nothing wrong: whether it hears so at its hello or while it waits for its view.
  const auto came_too_late = [&](const JobEnded& ended) {
    fmt::print(out, "{}: {}\n", name, ended.what());
    out << std::flush;
    return 0;
  };
  TaskStrategy built;
  try {
    built = make(state, input);
  } catch (const JobEnded& ended) {
    return came_too_late(ended);
  }
  try {
    const TrainResult result = run_training_loop(config, input, state, *built.strategy, out);
    return result.halt_signal != 0 ? 128 + result.halt_signal : 0;
  } catch (const JobEnded& ended) {
    return came_too_late(ended);
  } catch (const StopRequested& stopped) {
    if (built.abort) built.abort(stopped);
    fmt::print(out, "{}: {}\n", name, stopped.what());
    out << std::flush;
    return 128 + stopped.signal();
  } catch (const std::exception& error) {
    if (built.abort) built.abort(error);
    throw;
  }
}

std::shared_ptr<const StopRequest> handle_signals(const RunEnvironment& environment,
                                                  const TrainConfig& config,
                                                  const std::string& who) {
  if (!environment.handle_signals) return nullptr;
  return environment.handle_signals(std::chrono::milliseconds(config.shutdown_timeout_ms), who);
}

ClusterFlags cluster_flags_of(const RunPlan& plan) {
  const FlagValues& f = plan.flags;
  return {.ps_hosts = f.ps_hosts,
          .worker_hosts = f.worker_hosts,
          .job_name = f.job_name,
          .task_index = f.task_index,
          .cluster_file = f.cluster_file,
          .rendezvous = f.rendezvous,
          .ps_hosts_given = plan.has("--ps_hosts"),
          .worker_hosts_given = plan.has("--worker_hosts"),
          .job_name_given = plan.has("--job_name"),
          .rendezvous_given = plan.has("--rendezvous")};
}

// Under a launcher's ranks, an elastic all-reduce job's coordinator runs in rank 0's process,
// which must therefore stay for the whole run (docs/elastic.md).
void check_elastic_ranks(const RunPlan& plan, const LaunchEnv& env, int ps) {
  const FlagValues& f = plan.flags;
  const bool async = ps > 0 && plan.strategy == StrategyKind::kAsync && !f.sync_replicas;
  if (f.min_workers == 0) {
    if (plan.has("--max_workers") && !async) {
      throw UsageError("--max_workers: an elastic job's bound; give --min_workers too");
    }
    return;
  }
  // A sync job's ps tasks count its workers themselves: no coordinator.
  if (ps > 0 && (plan.strategy == StrategyKind::kSync || f.sync_replicas)) {
    if (plan.has("--max_workers")) {
      throw UsageError(
          "--max_workers: a sync job's workers are the ranks that are not ps tasks; only an "
          "all-reduce job takes more");
    }
    check_flag(plan, "--min_workers", env.world_size - ps);
    return;
  }
  if (ps > 0 || plan.strategy != StrategyKind::kAllreduce) {
    throw UsageError(fmt::format(
        "--min_workers {}: elastic jobs are all-reduce jobs (every rank a worker, no --ps) or "
        "sync ones; give --strategy allreduce, or --strategy sync with --ps",
        f.min_workers));
  }
  check_flag(plan, "--min_workers", env.world_size);
  if (f.max_workers != 0 && f.max_workers < env.world_size) {
    throw UsageError(fmt::format("--max_workers {}: must be at least the {} ranks {} starts",
                                 f.max_workers, env.world_size, env.source));
  }
}

// Under a launcher that gives ranks rather than addresses (mpirun, srun, torchrun): the ranks meet
// at the rendezvous; --ps P makes the first P of them ps tasks. nullopt for a world of one task,
// which `train` runs in this process. Train and task read a launcher's ranks alike, but a world of
// one is an error for task.
std::optional<LaunchedRanks> join_launched_cluster(const RunPlan& plan, const LaunchEnv& env,
                                                   const RunEnvironment& environment,
                                                   std::ostream& out) {
  const FlagValues& f = plan.flags;
  const std::string_view command = plan.command == Command::kTask ? "dtrain task" : "dtrain train";
  if (env.world_size == 1) {
    if (plan.command == Command::kTask) {
      throw UsageError(fmt::format(
          "{}=1: a cluster needs at least two tasks; to train in one process, run dtrain train",
          env.world_size_variable));
    }
    fmt::print(out, "{}: {} starts 1 task ({}=1): training in this process\n", command, env.source,
               env.world_size_variable);
    out << std::flush;
    return std::nullopt;
  }
  if (plan.has("--strategy") && !is_distributed(plan.strategy)) {
    throw UsageError(fmt::format(
        "--strategy {}: trains in one process, but {} starts {} of them; use --strategy allreduce "
        "(or async|sync with --ps P), or start one process without the launcher",
        strategy_name(plan.strategy), env.source, env.world_size));
  }
  // It bounds the rendezvous too, whatever the strategy.
  check_flag(plan, "--peer_timeout");
  std::string secret = required_cluster_secret(f.secret_file, environment.env, env.world_size,
                                               env.source, "--secret_file FILE");
  const int ps = plan.has("--ps") ? f.ps : 0;
  if (plan.has("--ps") && (ps < 1 || ps >= env.world_size)) {
    throw UsageError(
        fmt::format("--ps {}: must leave at least one of the {} ranks a worker, and be at least 1",
                    ps, env.world_size));
  }
  if (ps > 0 && plan.strategy == StrategyKind::kAllreduce) {
    throw UsageError(fmt::format(
        "--ps {}: the allreduce strategy has no ps tasks; leave --ps out to make every rank an "
        "all-reduce worker",
        ps));
  }
  if (ps == 0 && (is_ps(plan.strategy) || f.sync_replicas)) {
    throw UsageError(fmt::format(
        "{}: under {}, say how many of the ranks are ps tasks with --ps P (ranks 0..P-1)",
        f.sync_replicas ? std::string("--sync_replicas")
                        : fmt::format("--strategy {}", strategy_name(plan.strategy)),
        env.source));
  }
  check_elastic_ranks(plan, env, ps);
  const bool elastic = f.min_workers > 0 && ps == 0;
  fmt::print(out, "{}: rank {} of {} (local rank {}) from {}; rendezvous at {} ({})\n", command,
             env.rank, env.world_size, env.local_rank, env.source, env.rendezvous.to_string(),
             env.rendezvous_source);
  out << std::flush;
  RendezvousOptions options;
  options.address = env.rendezvous;
  options.source = env.rendezvous_source;
  options.rank = env.rank;
  options.world_size = env.world_size;
  options.secret = std::move(secret);
  options.authenticate_frames = !f.unauthenticated_frames;
  options.tcp_congestion = f.tcp_congestion;
  options.timeout_ms = f.peer_timeout * 1000;
  options.bind = f.bind;
  std::optional<ElasticBounds> bounds;
  if (elastic) {
    bounds = ElasticBounds{.min_workers = f.min_workers,
                           .max_workers = f.max_workers,
                           .timeout_ms = f.collective_timeout * 1000};
  }
  return meet_launched_ranks(std::move(options), ps, bounds, command, out);
}

// A cluster with ps tasks runs the ps strategies and one without runs allreduce; a strategy the
// user names must agree with the cluster.
StrategyKind strategy_of_cluster(const RunPlan& plan, const ClusterSpec& cluster) {
  const int ps = cluster.num_tasks(kPsJob);
  const std::string named = fmt::format("--strategy {}", strategy_name(plan.strategy));
  if (plan.strategy == StrategyKind::kAllreduce && ps > 0) {
    throw UsageError(fmt::format(
        "--strategy allreduce: the cluster has {} ps task(s) ({}); all-reduce runs on the workers "
        "alone: leave out --ps_hosts (or the \"ps\" job), or use --strategy async|sync",
        ps, cluster.to_string()));
  }
  const bool sync = plan.strategy == StrategyKind::kSync || plan.flags.sync_replicas;
  if ((is_ps(plan.strategy) || sync) && ps == 0) {
    throw UsageError(fmt::format(
        "{}: the cluster has no ps tasks ({}); give --ps_hosts (or a \"ps\" job), or use "
        "--strategy allreduce",
        is_ps(plan.strategy) ? named : std::string("--sync_replicas"), cluster.to_string()));
  }
  if (ps == 0) return StrategyKind::kAllreduce;
  return sync ? StrategyKind::kSync : StrategyKind::kAsync;
}

// One task of a cluster is started (and restarted) by whatever runs the cluster; the flags that
// size and supervise the local launcher's cluster would be silently ignored there.
void refuse_launcher_flags(const RunPlan& plan, bool launched, StrategyKind kind) {
  for (const FlagSpec& flag : flag_table()) {
    if (!flag.launcher_only || !plan.has(flag.name)) continue;
    // A sync job's ps tasks count its workers, and an async job's take joiners, in whatever
    // starts them.
    if (kind == StrategyKind::kSync && flag.name == "--min_workers") continue;
    if (kind == StrategyKind::kAsync && flag.name == "--max_workers") continue;
    // Which ranks are ps tasks, and an elastic job's bounds.
    if (launched &&
        (flag.name == "--ps" || flag.name == "--min_workers" || flag.name == "--max_workers"))
      continue;
    if (launched) {
      throw UsageError(fmt::format(
          "{}: the launcher that started this task decides {} (its world size, its restarts); "
          "leave it out",
          flag.name, flag.name == "--workers" ? "the workers" : "restarts"));
    }
    throw UsageError(fmt::format(
        "{}: this process is one task of the cluster its flags or TF_CONFIG describe, and {} "
        "belongs to the local launcher (dtrain train --strategy async|sync|allreduce without a "
        "cluster); leave it out, and let whatever starts the tasks restart them",
        flag.name, flag.name));
  }
}

// `dtrain task --join HOST:PORT --task_index N`: a worker that joins a running elastic job by its
// coordinator alone. It is the only worker of a cluster of its own, listening on the address this
// host reaches the coordinator from, and worker<N> in the job.
struct JoiningWorker {
  ClusterConfig cluster;
  HostPort coordinator;
  std::string name;
  std::optional<ClaimedWorker> claimed;  // an async job's: what its ps0 handed this worker
};

JoiningWorker joining_worker(const RunPlan& plan) {
  const FlagValues& f = plan.flags;
  if (!plan.has("--task_index")) {
    throw UsageError(
        "--join: say which worker this is with --task_index N; the job's workers are worker0, "
        "worker1, ..., and one that joins takes a number of its own");
  }
  if (plan.has("--ps_hosts") || plan.has("--worker_hosts") || plan.has("--job_name")) {
    throw UsageError(
        "--join: a worker that joins a running job finds it through its coordinator alone; leave "
        "out --ps_hosts, --worker_hosts and --job_name");
  }
  JoiningWorker joiner;
  joiner.coordinator = parse_host_port("--join", f.join);
  joiner.cluster = joining_worker_cluster(joiner.coordinator);
  joiner.name = fmt::format("{}{}", kWorkerJob, f.task_index);
  return joiner;
}

// `dtrain task --strategy async --join PS0_HOST:PORT`: a worker that joins a running async job
// through its ps0, which hands it the next free identity and says where the ps tasks are. It is
// the only worker of a cluster of its own (it listens nowhere), and worker<that identity> in the
// job.
JoiningWorker joining_async_worker(const RunPlan& plan, const RunEnvironment& environment) {
  const FlagValues& f = plan.flags;
  if (plan.has("--task_index") || plan.has("--ps_hosts") || plan.has("--worker_hosts") ||
      plan.has("--job_name")) {
    throw UsageError(
        "--join with --strategy async: the job's ps0 hands a joining worker its identity and the "
        "ps tasks' addresses; leave out --task_index, --ps_hosts, --worker_hosts and --job_name");
  }
  JoiningWorker joiner;
  joiner.coordinator = parse_host_port("--join", f.join);
  PsClientOptions options;
  options.ps = {joiner.coordinator};
  options.secret = cluster_secret(f.secret_file, environment.env);
  options.connection.authenticate_frames = !f.unauthenticated_frames;
  options.connection.tcp_congestion = f.tcp_congestion;
  options.connection.connect_timeout_ms = f.peer_timeout * 1000;
  options.transport = Transport::kTcp;  // one small request
  joiner.claimed = claim_worker(options, f.peer_timeout * 1000);
  joiner.cluster = joining_worker_cluster(
      joiner.coordinator, parse_host_list("ps0's answer", joiner.claimed->ps_hosts));
  joiner.name = fmt::format("{}{}", kWorkerJob, joiner.claimed->worker);
  return joiner;
}

// --threads given above the cores this process may use, said once, by whoever decided it: the run
// itself, the local launcher for all its workers (its tasks then say nothing), or a task started by
// hand. Not an error: the products are split as asked, and the threads take turns on the cores.
void say_threads_beyond_cores(const RunPlan& plan, int workers, const std::string& who,
                              std::ostream& out) {
  if (!plan.has("--threads") || plan.flags.local_task) return;
  const int cores = available_cores();
  const int threads = plan.config.threads * workers;
  if (threads <= cores) return;
  fmt::print(out,
             "{}: --threads {}{} is more than the {} core(s) this process may use: each matrix "
             "product is split {} ways as asked, and the {} threads take turns on the cores\n",
             who, plan.config.threads,
             workers > 1 ? fmt::format(" for each of {} workers", workers) : "", cores,
             plan.config.threads, threads);
  out << std::flush;
}

// This process is one task of a cluster: its flags, TF_CONFIG, a --cluster file or a launcher's
// ranks (`launched`) say where, `source` which.
int run_task(const RunPlan& plan, TrainConfig config, ClusterConfig cluster, bool launched,
             const std::optional<HostPort>& coordinator, const std::string& member_name,
             const std::string& source, const RunEnvironment& environment, std::ostream& out,
             const std::optional<ClaimedWorker>& claimed = std::nullopt) {
  cluster.bind_host = plan.flags.bind;
  cluster.authenticate_frames = !plan.flags.unauthenticated_frames;
  cluster.tcp_congestion = plan.flags.tcp_congestion;
  if (plan.flags.unauthenticated_frames) {
    spdlog::warn(
        "{}: --unauthenticated_frames: frames after the handshake carry a CRC only, so anyone "
        "on the network path can alter, replay or drop them undetected",
        cluster.task.to_string());
  }
  if (plan.has("--strategy") && !is_distributed(plan.strategy)) {
    throw UsageError(fmt::format(
        "--strategy {}: runs in one process; a cluster ({}) trains with --strategy async, sync "
        "or allreduce",
        strategy_name(plan.strategy), cluster.cluster.to_string()));
  }
  const StrategyKind kind = strategy_of_cluster(plan, cluster.cluster);
  refuse_launcher_flags(plan, launched, kind);
  // Under a launcher --peer_timeout also bounds the rendezvous, whatever the strategy.
  static constexpr std::string_view kRendezvousFlags[] = {"--peer_timeout"};
  refuse_flags_foreign_to(plan, kind,
                          launched ? std::span<const std::string_view>(kRendezvousFlags)
                                   : std::span<const std::string_view>());
  check_flags(plan, CheckWhen::kUnderItsStrategies, kind);
  // A sync job's ps tasks and workers count its workers in the cluster they were started in.
  if (kind == StrategyKind::kSync) {
    check_flag(plan, "--min_workers", static_cast<int>(training_workers(cluster.cluster).size()));
  }
  // An elastic member's cluster is the view it joins, not the job's configured size: its global
  // batch stays unknown (not compared) rather than wrong.
  if (plan.flags.min_workers == 0 && member_name.empty() && !claimed) {
    config.global_batch =
        global_batch_of(plan, kind, static_cast<int>(training_workers(cluster.cluster).size()));
  }
  const std::string name =
      member_name.empty() ? fmt::format("{}{}", cluster.task.job, cluster.task.index) : member_name;
  if (!config.train_dir.empty()) {
    if (plan.resume == ResumeMode::kOverwrite) {
      throw UsageError(
          "--overwrite: a task of a cluster, restarted later with the same flags, would delete "
          "the checkpoints it should recover from; empty the --train_dir before starting the "
          "cluster instead (dtrain train --overwrite does that for a cluster on this machine)");
    }
    const bool settled = plan.flags.local_task && plan.resume == ResumeMode::kResume;
    // A ps that learns what the job trains from the chief has no settings of its own to compare
    // with the checkpoint's: the chief settles it, and the ps restores what it then finds.
    const bool learns = cluster.task.job == kPsJob && !names_a_model(given_job_setting_flags(plan));
    if (!learns)
      settle_checkpoint(config, settled ? ResumeMode::kLauncherSettled : plan.resume, name, out);
  }
  say_threads_beyond_cores(plan, 1, name, out);
  // Its first line says where its place came from (a launcher's ranks, and the local launcher
  // for its tasks, have said so already).
  std::string place = launched || plan.flags.local_task
                          ? ""
                          : fmt::format("{}: {} of {}, from {}\n", name, cluster.task.to_string(),
                                        cluster.cluster.to_string(), source);
  // A worker that joins alone has no cluster to speak of: where it listens, and whom it joins.
  if (claimed) {
    place = fmt::format(
        "{}: joined the async job whose ps0 is at {} (--join) as worker {} of its {} (ps tasks "
        "{}); it trains on their shard {}\n",
        name, coordinator->to_string(), claimed->worker, claimed->job_workers, claimed->ps_hosts,
        claimed->worker % claimed->job_workers);
  } else if (!member_name.empty()) {
    place = fmt::format(
        "{}: joining the elastic job whose coordinator is at {} (--join), listening "
        "on {}\n",
        name, coordinator->to_string(), cluster.cluster.address(cluster.task).to_string());
  }
  // Served where the task itself listens (loopback for a cluster on this machine).
  config.metrics_host =
      bind_address_for(cluster.cluster.address(cluster.task), cluster.bind_host).host;
  const std::shared_ptr<const StopRequest> stop = handle_signals(environment, config, name);
  config.stop = stop.get();
  if (kind == StrategyKind::kAllreduce) {
    AllreduceClusterConfig c = allreduce_config(
        plan, std::move(cluster), cluster_secret(plan.flags.secret_file, environment.env));
    if (coordinator) c.coordinator = coordinator;
    c.member_name = member_name;
    out << place << std::flush;
    begin_allreduce_task(c);
    return train_with(
        config, name,
        [&](TrainingState& state, const TrainingInput& input) {
          return make_allreduce_strategy(config, c, state, input, out);
        },
        out);
  }
  PsClusterConfig c = ps_config(plan, kind, std::move(cluster),
                                cluster_secret(plan.flags.secret_file, environment.env));
  if (claimed) {
    c.joined_as = claimed->worker;
    c.job_workers = claimed->job_workers;
  }
  out << place << std::flush;
  if (begin_ps_task(c)) return run_ps_service(config, c, out);
  return train_with(
      config, name,
      [&](TrainingState& state, const TrainingInput&) {
        return make_ps_worker_strategy(config, c, state, out);
      },
      out);
}

}  // namespace

int run_plan(const RunPlan& plan, const RunEnvironment& environment, std::ostream& out) {
  TrainConfig config = plan.config;
  // The chief draws it (train/training_loop.h), under the local launcher through its pipe.
  config.progress_bar =
      plan.flags.progress && (environment.terminal || plan.flags.progress_through_launcher);
  ClusterSource found = find_cluster_source(cluster_flags_of(plan), environment.env);
  bool launched = false;
  std::optional<HostPort> coordinator;
  std::unique_ptr<MembershipService> coordinator_service;  // rank 0's, for the whole run
  if (found.launcher) {
    if (std::optional<LaunchedRanks> l =
            join_launched_cluster(plan, *found.launcher, environment, out)) {
      found.cluster = std::move(l->config);
      launched = true;
      coordinator = l->coordinator;
      coordinator_service = std::move(l->coordinator_service);
      // Ranks on one host share its cores unless told otherwise.
      if (!plan.has("--threads")) config.threads = std::max(1, config.threads / l->ranks_on_host);
    } else if (plan.has("--rendezvous")) {
      throw UsageError(
          "--rendezvous: belongs to a task under a launcher (mpirun, srun, torchrun-style "
          "variables), and none gives this process a rank; leave it out");
    }
  }
  if (found.cluster) {
    return run_task(plan, std::move(config), std::move(*found.cluster), launched, coordinator, "",
                    found.source, environment, out);
  }
  if (plan.command == Command::kTask && !plan.flags.join.empty() &&
      plan.strategy == StrategyKind::kAsync) {
    const JoiningWorker joiner = joining_async_worker(plan, environment);
    return run_task(plan, std::move(config), joiner.cluster, false, joiner.coordinator, joiner.name,
                    "--join", environment, out, joiner.claimed);
  }
  if (plan.command == Command::kTask && !plan.flags.join.empty()) {
    const JoiningWorker joiner = joining_worker(plan);
    return run_task(plan, std::move(config), joiner.cluster, false, joiner.coordinator, joiner.name,
                    "--join", environment, out);
  }
  if (plan.command == Command::kTask) {
    throw UsageError(
        "dtrain task needs a cluster: --ps_hosts/--worker_hosts/--job_name/--task_index, "
        "TF_CONFIG, --cluster FILE, or a launcher's ranks (mpirun, srun, torchrun-style RANK and "
        "WORLD_SIZE) with a rendezvous");
  }
  refuse_flags_foreign_to(plan, plan.strategy);
  if (is_distributed(plan.strategy)) {
    // A missing data file is one error here rather than one from every task.
    if (!config.train_data.empty()) {
      expand_data_paths(config.train_data);
      expand_data_paths(config.test_data);
    }
    if (plan.flags.min_workers == 0)
      config.global_batch = global_batch_of(plan, plan.strategy, plan.flags.workers);
    if (!config.train_dir.empty()) settle_checkpoint(config, plan.resume, "dtrain train", out);
    say_threads_beyond_cores(plan, plan.flags.workers, "dtrain train", out);
    return launch_local_cluster(plan, environment, out);
  }
  config.global_batch = global_batch_of(plan, plan.strategy, 1);
  if (!config.train_dir.empty()) settle_checkpoint(config, plan.resume, "dtrain train", out);
  say_threads_beyond_cores(plan, 1, "dtrain train", out);
  const std::shared_ptr<const StopRequest> stop =
      handle_signals(environment, config, "dtrain train");
  config.stop = stop.get();
  return train_with(
      config, "dtrain train",
      [&](TrainingState&, const TrainingInput&) {
        return TaskStrategy{std::make_unique<LocalStrategy>(config), nullptr};
      },
      out);
}

}  // namespace dtrain
