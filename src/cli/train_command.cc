// `dtrain train`: flags (the names of the TensorFlow tutorials where they have one) → TrainConfig.
// Flags the user leaves out take the model's recipe (train/recipes.h).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string_view>

#include "base/cpu.h"
#include "base/error.h"
#include "base/log.h"
#include "cli/commands.h"
#include "cli/shutdown.h"
#include "cluster/cluster_spec.h"
#include "cluster/launch_env.h"
#include "cluster/local_launcher.h"
#include "cluster/rendezvous.h"
#include "data/data_files.h"
#include "data/data_options.h"
#include "ps/partition.h"
#include "train/allreduce_trainer.h"
#include "train/ps_trainer.h"
#include "train/recipes.h"
#include "train/resume_check.h"
#include "train/trainer.h"

namespace dtrain::cli {
namespace {

struct TrainFlags {
  std::string model = "mnist_inference";
  std::string strategy = "local";
  int hidden_units = 100;
  int batch_size = 100;
  float learning_rate = 0;
  float lr_decay_rate = 0;
  std::string lr_schedule = "exponential";
  int64_t lr_decay_steps = 0;
  float lr_alpha = 0;
  std::vector<int64_t> lr_boundaries;
  std::vector<float> lr_values;
  int64_t lr_warmup_steps = 0;
  float moving_average_decay = 0;
  float l2 = 0;
  std::string optimizer;
  int64_t train_steps = 0;
  double epochs = 0;
  std::string data_dir;
  std::string train_data, test_data;
  DataOptions data_options;  // --data_format, --compression, --image_feature, ...
  int64_t shuffle_buffer = 0;
  std::string train_dir;
  std::string logdir;
  int64_t summary_steps = 100;
  int64_t validation_size = 5000;
  uint64_t seed = 1;
  int threads = available_cores();
  int towers = 1;
  int64_t log_every = 100;
  double log_secs = 10;
  int64_t save_steps = 0;
  double save_secs = 0;
  int keep_checkpoints = 5;
  double shutdown_timeout = 20;
  int64_t eval_every = 0;
  double target_accuracy = 0;
  int64_t early_stopping_patience = 0;
  bool progress = true;
  bool progress_through_launcher = false;
  // The ps strategies.
  int ps = 1;
  int workers = 2;
  std::string ps_hosts, worker_hosts, job_name, cluster_file, secret_file, bind, rendezvous;
  bool unauthenticated_frames = false;
  int task_index = 0;
  bool sync_replicas = false;
  bool resume = false;     // go on from --train_dir's checkpoint even with changed settings
  bool overwrite = false;  // delete --train_dir's checkpoints and start afresh
  int replicas_to_aggregate = 0;
  int total_num_replicas = 0;
  std::string placement = "balanced";
  size_t min_shard_bytes = 64 * 1024;
  int peer_timeout = 600;
  int step_delay_ms = 0;
  int worker_timeout = 60;
  int liveness_timeout = 10;
  std::string on_worker_loss = "stop";
  std::vector<int64_t> inject_nonfinite_at;
  // The allreduce strategy.
  size_t fusion_bytes = 0;
  int collective_timeout = 60;
  std::string transport = "auto";
  int max_restarts = 3;
};

LrDecay parse_lr_schedule(const std::string& name) {
  if (name == "cosine") return LrDecay::kCosine;
  if (name == "piecewise") return LrDecay::kPiecewise;
  return LrDecay::kExponential;
}

// The flags of one schedule mean nothing under another; validate_train_config checks the values.
void schedule_to_config(const CLI::App& cmd, const TrainFlags& f, TrainConfig& c) {
  c.lr_schedule = parse_lr_schedule(f.lr_schedule);
  auto refuse = [&](const char* flag, const char* why) {
    if (cmd.count(flag) == 0) return;
    throw UsageError(fmt::format("{} {}: {} (--lr_schedule {})", flag,
                                 cmd.get_option(flag)->as<std::string>(), why, f.lr_schedule));
  };
  if (c.lr_schedule != LrDecay::kExponential)
    refuse("--lr_decay_rate", "only the exponential schedule has a decay rate");
  if (c.lr_schedule == LrDecay::kPiecewise) {
    refuse("--learning_rate", "the piecewise schedule takes its rates from --lr_values");
    refuse("--lr_decay_steps", "the piecewise schedule changes at --lr_boundaries");
  }
  c.lr_decay_steps = f.lr_decay_steps;
  c.lr_alpha = f.lr_alpha;
  c.lr_boundaries = f.lr_boundaries;
  c.lr_values = f.lr_values;
  c.lr_warmup_steps = f.lr_warmup_steps;
}

TrainConfig to_config(const CLI::App& cmd, const TrainFlags& f) {
  TrainConfig c = recipe_for(f.model);
  auto given = [&](const char* name) { return cmd.count(name) > 0; };
  c.model.hidden_units = f.hidden_units;
  if (given("--l2")) c.model.l2 = f.l2;
  if (given("--optimizer")) c.optimizer.name = f.optimizer;
  if (given("--learning_rate")) c.learning_rate = f.learning_rate;
  if (given("--lr_decay_rate")) c.lr_decay_rate = f.lr_decay_rate;
  schedule_to_config(cmd, f, c);
  if (given("--moving_average_decay")) {
    c.moving_average_decay = f.moving_average_decay;
    c.eval_moving_average = f.moving_average_decay > 0;
  }
  if (given("--train_steps")) c.train_steps = f.train_steps;
  if (given("--epochs")) {
    c.epochs = f.epochs;
    if (!given("--train_steps")) c.train_steps = 0;
  }
  c.batch_size = f.batch_size;
  c.data_dir = f.data_dir.empty() ? default_data_dir() : f.data_dir;
  c.train_data = f.train_data;
  c.test_data = f.test_data;
  c.data_options = f.data_options;
  c.shuffle_buffer = f.shuffle_buffer;
  c.train_dir = f.train_dir;
  c.logdir = f.logdir;
  c.summary_steps = f.summary_steps;
  // MNIST holds out its first 5000 training examples, as TensorFlow's read_data_sets does; a
  // user's own files are trained on whole unless told otherwise.
  c.validation_size = given("--validation_size") || f.train_data.empty() ? f.validation_size : 0;
  c.seed = f.seed;
  c.threads = f.threads;
  c.towers = f.towers;
  c.log_every = f.log_every;
  c.log_secs = f.log_secs;
  c.save_steps = f.save_steps;
  c.save_secs = f.save_secs;
  c.keep_checkpoints = f.keep_checkpoints;
  c.shutdown_timeout_ms = static_cast<int>(std::lround(f.shutdown_timeout * 1000));
  c.eval_every = f.eval_every;
  // Without --eval_every, a target is checked four times an epoch (train/training_loop.h).
  if (given("--target_accuracy")) c.target_accuracy = f.target_accuracy;
  c.early_stopping_patience = f.early_stopping_patience;
  // The chief draws it (train/training_loop.h), under the local launcher through its pipe.
  c.progress_bar = f.progress && (isatty(STDOUT_FILENO) || f.progress_through_launcher);
  c.nonfinite_gradient_steps = f.inject_nonfinite_at;
  c.step_delay_ms = f.step_delay_ms;
  if (f.strategy == "towers" && !given("--towers")) c.towers = 2;
  validate_train_config(c);
  return c;
}

// The strategies under which a flag means something; any other refuses it by name, so that no
// flag is silently ignored. Flags not listed mean the same under every strategy.
struct StrategyFlag {
  const char* name;
  std::vector<std::string_view> strategies;
  // Under this strategy, `hint` is said (after the value) instead of the list of strategies.
  const char* hint_strategy = "";
  const char* hint = nullptr;
};

const std::vector<StrategyFlag>& strategy_flags() {
  static const std::vector<StrategyFlag> flags = {
      {"--towers", {"towers", "async", "sync", "allreduce"}, "local", "needs --strategy towers"},
      {"--ps",
       {"async", "sync"},
       "allreduce",
       "the allreduce strategy has no ps tasks (the workers average their gradients among "
       "themselves); leave --ps out"},
      {"--workers", {"async", "sync", "allreduce"}},
      {"--max_restarts", {"async", "sync", "allreduce"}},
      {"--sync_replicas", {"async", "sync"}},
      {"--replicas_to_aggregate", {"sync"}},
      {"--total_num_replicas", {"sync"}},
      {"--placement", {"async", "sync"}},
      {"--min_shard_bytes", {"async", "sync"}},
      {"--peer_timeout", {"async", "sync"}},
      {"--worker_timeout", {"async", "sync"}},
      {"--liveness_timeout", {"async", "sync"}},
      {"--on_worker_loss", {"async", "sync"}},
      {"--fusion_bytes", {"allreduce"}},
      {"--collective_timeout", {"allreduce"}},
      {"--transport", {"async", "sync", "allreduce"}},
      {"--inject_nonfinite_at", {"async", "sync", "allreduce"}},
      {"--bind", {"async", "sync", "allreduce"}},
      {"--unauthenticated_frames", {"async", "sync", "allreduce"}},
  };
  return flags;
}

void refuse_flags_foreign_to(const CLI::App& cmd, const std::string& strategy,
                             const std::vector<std::string_view>& meaningful_here = {}) {
  for (const StrategyFlag& flag : strategy_flags()) {
    if (cmd.count(flag.name) == 0) continue;
    if (std::find(meaningful_here.begin(), meaningful_here.end(), flag.name) !=
        meaningful_here.end()) {
      continue;
    }
    if (std::find(flag.strategies.begin(), flag.strategies.end(), strategy) !=
        flag.strategies.end()) {
      continue;
    }
    if (flag.hint != nullptr && strategy == flag.hint_strategy) {
      throw UsageError(fmt::format("{} {}: {}", flag.name,
                                   cmd.get_option(flag.name)->as<std::string>(), flag.hint));
    }
    if (std::string_view(flag.name) == "--inject_nonfinite_at") {
      throw UsageError(fmt::format(
          "--inject_nonfinite_at: the {} strategy has nobody to refuse the gradient; use "
          "--strategy async, sync or allreduce",
          strategy));
    }
    throw UsageError(fmt::format("{}: means nothing under --strategy {}; it applies to {}",
                                 flag.name, strategy, fmt::join(flag.strategies, ", ")));
  }
}

bool is_ps_strategy(const std::string& strategy) {
  return strategy == "async" || strategy == "sync";
}

// This task's place in a real cluster: the tutorials' flags, else TF_CONFIG, else --cluster; sets
// `source` to which. nullopt when none is given.
std::optional<ClusterConfig> cluster_of(const CLI::App& cmd, const TrainFlags& f,
                                        std::string& source) {
  auto given = [&](const char* name) { return cmd.count(name) > 0; };
  const bool flags = given("--ps_hosts") || given("--worker_hosts") || given("--job_name");
  if (flags) {
    if (!given("--job_name")) {
      throw UsageError("--ps_hosts/--worker_hosts need --job_name (ps or worker) and --task_index");
    }
    if (!f.cluster_file.empty() && !given("--worker_hosts")) {
      source = "--cluster " + f.cluster_file + " and --job_name/--task_index";
      return cluster_from_file(f.cluster_file, TaskId{f.job_name, f.task_index});
    }
    source = "--ps_hosts/--worker_hosts/--job_name/--task_index";
    return cluster_from_flags(f.ps_hosts, f.worker_hosts, f.job_name, f.task_index);
  }
  if (const char* tf_config = std::getenv("TF_CONFIG"); tf_config && *tf_config) {
    source = "TF_CONFIG";
    return cluster_from_tf_config(tf_config);
  }
  if (!f.cluster_file.empty()) {
    source = "--cluster " + f.cluster_file;
    return cluster_from_file(f.cluster_file);
  }
  return std::nullopt;
}

// Under a launcher that gives ranks rather than addresses (mpirun, srun, torchrun): the ranks meet
// at the rendezvous; --ps P makes the first P of them ps tasks. Says where its place came from.
// nullopt outside such a launcher.
struct LaunchedCluster {
  ClusterConfig config;
  int ranks_on_host = 1;  // the ranks that split this host's cores
};

// `command` is "dtrain train" or "dtrain task": both read the launcher's ranks the same way, but a
// world of one task is a local run for train and an error for task.
std::optional<LaunchedCluster> launched_cluster(const CLI::App& cmd, const TrainFlags& f,
                                                std::string_view command) {
  const std::optional<LaunchEnv> env = launch_env_from(process_env(), f.rendezvous);
  if (!env) {
    if (cmd.count("--rendezvous") > 0) {
      throw UsageError(
          "--rendezvous: no launcher gives this task a rank (OMPI_COMM_WORLD_RANK, PMI_RANK, "
          "SLURM_PROCID or RANK); start it with mpirun, srun or torchrun-style variables");
    }
    return std::nullopt;
  }
  if (env->world_size == 1) {
    if (command == "dtrain task") {
      throw UsageError(fmt::format(
          "{}=1: a cluster needs at least two tasks; to train in one process, run dtrain train",
          env->world_size_variable));
    }
    fmt::print("{}: {} starts 1 task ({}=1): training in this process\n", command, env->source,
               env->world_size_variable);
    std::fflush(stdout);
    return std::nullopt;
  }
  if (cmd.count("--strategy") > 0 && !is_ps_strategy(f.strategy) && f.strategy != "allreduce") {
    throw UsageError(fmt::format(
        "--strategy {}: trains in one process, but {} starts {} of them; use --strategy allreduce "
        "(or async|sync with --ps P), or start one process without the launcher",
        f.strategy, env->source, env->world_size));
  }
  if (f.peer_timeout < 1) {
    throw UsageError(fmt::format("--peer_timeout {}: must be at least 1 second", f.peer_timeout));
  }
  std::string secret = cluster_secret(f.secret_file);
  if (secret.empty()) {
    throw UsageError(fmt::format(
        "no cluster secret: the {} ranks {} starts need the same one: run `export "
        "DTRAIN_SECRET=$(openssl rand -hex 32)` before launching (on several hosts pass it on, "
        "e.g. mpirun -x DTRAIN_SECRET), or give --secret_file FILE",
        env->world_size, env->source));
  }
  const int ps = cmd.count("--ps") > 0 ? f.ps : 0;
  if (cmd.count("--ps") > 0 && (ps < 1 || ps >= env->world_size)) {
    throw UsageError(
        fmt::format("--ps {}: must leave at least one of the {} ranks a worker, and be at least 1",
                    ps, env->world_size));
  }
  if (ps > 0 && f.strategy == "allreduce") {
    throw UsageError(fmt::format(
        "--ps {}: the allreduce strategy has no ps tasks; leave --ps out to make every rank an "
        "all-reduce worker",
        ps));
  }
  if (ps == 0 && (is_ps_strategy(f.strategy) || f.sync_replicas)) {
    throw UsageError(fmt::format(
        "{}: under {}, say how many of the ranks are ps tasks with --ps P (ranks 0..P-1)",
        f.sync_replicas ? std::string("--sync_replicas") : "--strategy " + f.strategy,
        env->source));
  }
  fmt::print("{}: rank {} of {} (local rank {}) from {}; rendezvous at {} ({})\n", command,
             env->rank, env->world_size, env->local_rank, env->source, env->rendezvous.to_string(),
             env->rendezvous_source);
  std::fflush(stdout);
  RendezvousOptions options;
  options.address = env->rendezvous;
  options.source = env->rendezvous_source;
  options.rank = env->rank;
  options.world_size = env->world_size;
  options.secret = std::move(secret);
  options.authenticate_frames = !f.unauthenticated_frames;
  options.timeout_ms = f.peer_timeout * 1000;
  options.bind = f.bind;
  const std::vector<HostPort> ranks = rendezvous(options);
  LaunchedCluster launched{cluster_of_ranks(ranks, env->rank, ps),
                           ranks_on_host_of(ranks, env->rank)};
  fmt::print("{}: rank {} is {} of {}\n", command, env->rank, launched.config.task.to_string(),
             launched.config.cluster.to_string());
  std::fflush(stdout);
  return launched;
}

// A cluster with ps tasks runs the ps strategies and one without runs allreduce; a strategy the
// user names must agree with the cluster.
bool runs_allreduce(const TrainFlags& f, const ClusterSpec& cluster) {
  const int ps = cluster.num_tasks(kPsJob);
  if (f.strategy == "allreduce" && ps > 0) {
    throw UsageError(fmt::format(
        "--strategy allreduce: the cluster has {} ps task(s) ({}); all-reduce runs on the workers "
        "alone: leave out --ps_hosts (or the \"ps\" job), or use --strategy async|sync",
        ps, cluster.to_string()));
  }
  const bool wants_ps = is_ps_strategy(f.strategy) || f.sync_replicas;
  if (wants_ps && ps == 0) {
    throw UsageError(fmt::format(
        "{}: the cluster has no ps tasks ({}); give --ps_hosts (or a \"ps\" job), or use "
        "--strategy allreduce",
        is_ps_strategy(f.strategy) ? "--strategy " + f.strategy : std::string("--sync_replicas"),
        cluster.to_string()));
  }
  return ps == 0;
}

// Checked by the launcher too, so that a bad value is one error rather than one per task.
void check_allreduce_flags(const TrainFlags& f) {
  if (f.fusion_bytes != 0 && f.fusion_bytes < sizeof(float)) {
    throw UsageError(
        fmt::format("--fusion_bytes {}: must be 0 (one buffer) or at least {} (one float)",
                    f.fusion_bytes, sizeof(float)));
  }
  if (f.collective_timeout < 1) {
    throw UsageError(
        fmt::format("--collective_timeout {}: must be at least 1 second", f.collective_timeout));
  }
}

AllreduceClusterConfig allreduce_config(const TrainFlags& f, ClusterConfig cluster) {
  check_allreduce_flags(f);
  AllreduceClusterConfig c;
  c.cluster = std::move(cluster);
  c.secret = cluster_secret(f.secret_file);
  c.fusion_bytes = f.fusion_bytes;
  c.collective_timeout_ms = f.collective_timeout * 1000;
  c.transport = parse_transport(f.transport);
  return c;
}

// Checked by the launcher too, for the cluster it is about to start (workers), so that a bad value
// is one error rather than one per task.
void check_ps_flags(const TrainFlags& f, int workers) {
  for (const auto& [name, seconds] : {std::pair{"--peer_timeout", f.peer_timeout},
                                      std::pair{"--worker_timeout", f.worker_timeout},
                                      std::pair{"--liveness_timeout", f.liveness_timeout}}) {
    if (seconds < 1)
      throw UsageError(fmt::format("{} {}: must be at least 1 second", name, seconds));
  }
  if (workers <= 0) return;  // a task checks these against its cluster (ps_trainer.cc)
  if (f.replicas_to_aggregate < 0 || f.replicas_to_aggregate > workers) {
    throw UsageError(fmt::format("--replicas_to_aggregate {}: must be in 1..{} (the workers)",
                                 f.replicas_to_aggregate, workers));
  }
  if (f.total_num_replicas != 0 && f.total_num_replicas != workers) {
    throw UsageError(fmt::format(
        "--total_num_replicas {}: the cluster has {} training workers; give {} or leave it out",
        f.total_num_replicas, workers, workers));
  }
}

PsClusterConfig ps_config(const TrainFlags& f, ClusterConfig cluster) {
  check_ps_flags(f, 0);
  PsClusterConfig c;
  c.cluster = std::move(cluster);
  c.secret = cluster_secret(f.secret_file);
  c.placement = parse_placement(f.placement);
  c.min_shard_bytes = f.min_shard_bytes;
  c.sync.sync_replicas = f.sync_replicas || f.strategy == "sync";
  c.sync.replicas_to_aggregate = f.replicas_to_aggregate;
  c.sync.total_num_replicas = f.total_num_replicas;
  c.peer_timeout_ms = f.peer_timeout * 1000;
  c.worker_timeout_ms = f.worker_timeout * 1000;
  c.liveness_timeout_ms = f.liveness_timeout * 1000;
  c.on_worker_loss =
      f.on_worker_loss == "continue" ? WorkerLossPolicy::kContinue : WorkerLossPolicy::kStop;
  c.transport = parse_transport(f.transport);
  return c;
}

bool is_resume_flag(std::string_view arg) {
  for (std::string_view name : {"--resume", "--overwrite"}) {
    if (arg == name ||
        (arg.starts_with(name) && arg.size() > name.size() && arg[name.size()] == '=')) {
      return true;
    }
  }
  return false;
}

ResumeMode resume_mode(const TrainFlags& f) {
  if (f.resume && f.overwrite) {
    throw UsageError(
        "--resume and --overwrite: choose one (go on from the checkpoint, or start "
        "afresh)");
  }
  return f.overwrite ? ResumeMode::kOverwrite
         : f.resume  ? ResumeMode::kResume
                     : ResumeMode::kDefault;
}

// The embedded default (DESIGN.md §3): the whole cluster as child processes of this binary on
// loopback, each running `dtrain task` with the user's flags and its place in the cluster. The ps
// strategies get --ps ps tasks; allreduce gets none, which is what makes its tasks run allreduce.
int launch_local_cluster(const CLI::App& cmd, const TrainFlags& f) {
  const bool allreduce = f.strategy == "allreduce";
  if (allreduce && cmd.count("--ps") > 0) {
    throw UsageError(fmt::format(
        "--ps {}: the allreduce strategy has no ps tasks (the workers average their gradients "
        "among themselves); leave --ps out",
        f.ps));
  }
  const int ps = allreduce ? 0 : f.ps;
  if (!allreduce && ps < 1) throw UsageError(fmt::format("--ps {}: need at least one ps task", ps));
  if (f.workers < 1) throw UsageError(fmt::format("--workers {}: need at least one", f.workers));
  if (allreduce) {
    check_allreduce_flags(f);
  } else {
    check_ps_flags(f, f.workers);
  }
  if (f.max_restarts < 0) {
    throw UsageError(fmt::format("--max_restarts {}: must not be negative", f.max_restarts));
  }
  const std::vector<uint16_t> ports = pick_free_ports(ps + f.workers);
  auto hosts = [&](int first, int n) {
    std::vector<std::string> list;
    for (int i = 0; i < n; ++i) list.push_back(fmt::format("localhost:{}", ports[first + i]));
    return fmt::format("{}", fmt::join(list, ","));
  };
  const std::string ps_hosts = hosts(0, ps);
  const std::string worker_hosts = hosts(ps, f.workers);
  // The user's flags, less those that choose the launch, go to every task.
  std::vector<std::string> common = {"task"};
  for (const std::string& arg :
       without_options(train_arguments(), {"--strategy", "--ps", "--workers", "--max_restarts"})) {
    if (!is_resume_flag(arg)) common.push_back(arg);
  }
  // This process settled --train_dir's checkpoint once for the cluster; a task restarted later
  // must resume from what the run saved since, never wipe it again.
  if (!f.train_dir.empty()) common.push_back("--resume");
  if (f.strategy == "sync") common.push_back("--sync_replicas");
  // Named again so that a task refuses a cluster with ps tasks rather than run async in it.
  if (allreduce) common.insert(common.end(), {"--strategy", "allreduce"});
  // The workers share this machine's cores unless told otherwise.
  if (cmd.count("--threads") == 0) {
    common.insert(common.end(),
                  {"--threads", std::to_string(std::max(1, available_cores() / f.workers))});
  }
  // The chief's progress bar comes through its pipe, and the relay draws it on this terminal.
  const bool terminal = isatty(STDOUT_FILENO) != 0;
  if (terminal && f.progress) common.push_back("--progress_through_launcher");
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

  LaunchOptions options;
  options.binary = "/proc/self/exe";
  options.max_restarts = f.max_restarts;
  options.restart = allreduce ? RestartPolicy::kGroup : RestartPolicy::kTask;
  // The tasks stop by themselves within the same time; SIGKILL is for one that cannot.
  options.grace = std::chrono::milliseconds(std::lround(f.shutdown_timeout * 1000));
  options.extra_env.push_back("DTRAIN_SECRET=" + new_cluster_secret());
  options.terminal = terminal;
  if (allreduce) {
    fmt::print("dtrain train: strategy allreduce, {} workers on this machine ({})\n", f.workers,
               worker_hosts);
  } else {
    fmt::print(
        "dtrain train: strategy {}, {} ps and {} workers on this machine (ps {}, workers "
        "{})\n",
        f.strategy, ps, f.workers, ps_hosts, worker_hosts);
  }
  std::cout << std::flush;
  const LaunchResult result = run_local_cluster(tasks, options, std::cout);
  for (const std::string& line : result.failed) std::cerr << "dtrain: " << line << "\n";
  if (result.interrupted) std::cerr << "dtrain: interrupted; every task has been stopped\n";
  return result.exit_code;
}

// One task of a cluster is started (and restarted) by whatever runs the cluster; the flags that
// size and supervise the local launcher's cluster would be silently ignored there.
void refuse_launcher_flags(const CLI::App& cmd, bool launched) {
  for (const char* name : {"--ps", "--workers", "--max_restarts"}) {
    if (cmd.count(name) == 0) continue;
    if (launched && std::string_view(name) == "--ps") continue;  // which ranks are ps tasks
    if (launched) {
      throw UsageError(fmt::format(
          "{}: the launcher that started this task decides {} (its world size, its restarts); "
          "leave it out",
          name, std::string_view(name) == "--workers" ? "the workers" : "restarts"));
    }
    throw UsageError(fmt::format(
        "{}: this process is one task of the cluster its flags or TF_CONFIG describe, and {} "
        "belongs to the local launcher (dtrain train --strategy async|sync|allreduce without a "
        "cluster); leave it out, and let whatever starts the tasks restart them",
        name, name));
  }
}

int run_training(const CLI::App& cmd, const TrainFlags& flags, bool task_only) {
  TrainConfig config = to_config(cmd, flags);
  std::string source;
  std::optional<ClusterConfig> cluster = cluster_of(cmd, flags, source);
  bool launched = false;
  if (!cluster) {
    if (std::optional<LaunchedCluster> l =
            launched_cluster(cmd, flags, task_only ? "dtrain task" : "dtrain train")) {
      cluster = std::move(l->config);
      launched = true;
      // Ranks on one host share its cores unless told otherwise.
      if (cmd.count("--threads") == 0)
        config.threads = std::max(1, config.threads / l->ranks_on_host);
    }
  }
  if (!launched && cmd.count("--rendezvous") > 0) {
    throw UsageError(
        cluster ? fmt::format("--rendezvous: this task's place comes from {}; the rendezvous is "
                              "for tasks that mpirun, srun or torchrun-style variables start "
                              "with a rank only; leave it out",
                              source)
                : std::string("--rendezvous: belongs to a task under a launcher (mpirun, "
                              "srun, torchrun-style variables), and none gives this process a "
                              "rank; leave it out"));
  }
  if (cluster) {
    refuse_launcher_flags(cmd, launched);
    cluster->bind_host = flags.bind;
    cluster->authenticate_frames = !flags.unauthenticated_frames;
    if (flags.unauthenticated_frames) {
      spdlog::warn(
          "{}: --unauthenticated_frames: frames after the handshake carry a CRC only, so anyone "
          "on the network path can alter, replay or drop them undetected",
          cluster->task.to_string());
    }
    if (cmd.count("--strategy") > 0 && !is_ps_strategy(flags.strategy) &&
        flags.strategy != "allreduce") {
      throw UsageError(fmt::format(
          "--strategy {}: runs in one process; a cluster ({}) trains with --strategy async, sync "
          "or allreduce",
          flags.strategy, cluster->cluster.to_string()));
    }
    const bool allreduce = runs_allreduce(flags, cluster->cluster);
    // Under a launcher --peer_timeout also bounds the rendezvous, whatever the strategy.
    refuse_flags_foreign_to(cmd,
                            allreduce                                         ? "allreduce"
                            : flags.sync_replicas || flags.strategy == "sync" ? "sync"
                                                                              : "async",
                            launched ? std::vector<std::string_view>{"--peer_timeout"}
                                     : std::vector<std::string_view>{});
    validate_train_config(config);
    const std::string name = fmt::format("{}{}", cluster->task.job, cluster->task.index);
    if (!config.train_dir.empty()) {
      if (flags.overwrite) {
        throw UsageError(
            "--overwrite: a task of a cluster, restarted later with the same flags, would delete "
            "the checkpoints it should recover from; empty the --train_dir before starting the "
            "cluster instead (dtrain train --overwrite does that for a cluster on this machine)");
      }
      settle_checkpoint(config, resume_mode(flags), name, std::cout);
    }
    // Its first line says where its place came from (a launcher's ranks have said so already).
    const std::string place =
        launched ? ""
                 : fmt::format("{}: {} of {}, from {}\n", name, cluster->task.to_string(),
                               cluster->cluster.to_string(), source);
    const GracefulShutdown shutdown(std::chrono::milliseconds(config.shutdown_timeout_ms), name);
    config.stop = &shutdown.request();
    if (allreduce) {
      AllreduceClusterConfig c = allreduce_config(flags, std::move(*cluster));
      std::cout << place << std::flush;
      return run_allreduce_task(config, std::move(c), std::cout);
    }
    PsClusterConfig c = ps_config(flags, std::move(*cluster));
    std::cout << place << std::flush;
    return run_ps_task(config, std::move(c), std::cout);
  }
  if (task_only) {
    throw UsageError(
        "dtrain task needs a cluster: --ps_hosts/--worker_hosts/--job_name/--task_index, "
        "TF_CONFIG, --cluster FILE, or a launcher's ranks (mpirun, srun, torchrun-style RANK and "
        "WORLD_SIZE) with a rendezvous");
  }
  refuse_flags_foreign_to(cmd, flags.strategy);
  if (is_ps_strategy(flags.strategy) || flags.strategy == "allreduce") {
    // A missing data file is one error here rather than one from every task.
    if (!config.train_data.empty()) {
      expand_data_paths(config.train_data);
      expand_data_paths(config.test_data);
    }
    if (!config.train_dir.empty())
      settle_checkpoint(config, resume_mode(flags), "dtrain train", std::cout);
    return launch_local_cluster(cmd, flags);
  }
  if (flags.strategy == "local" && config.towers > 1) {
    throw UsageError(fmt::format("--towers {} needs --strategy towers", config.towers));
  }
  validate_train_config(config);
  if (!config.train_dir.empty())
    settle_checkpoint(config, resume_mode(flags), "dtrain train", std::cout);
  const GracefulShutdown shutdown(std::chrono::milliseconds(config.shutdown_timeout_ms),
                                  "dtrain train");
  config.stop = &shutdown.request();
  const TrainResult result = train_local(config, std::cout);
  return result.halt_signal != 0 ? 128 + result.halt_signal : 0;
}

}  // namespace

namespace {

void add_cluster_flags(CLI::App* cmd, TrainFlags* flags) {
  cmd->add_option("--ps", flags->ps,
                  "ps tasks the local launcher starts; under mpirun, srun or torchrun-style "
                  "variables, ranks 0..P-1 (--strategy async|sync)")
      ->capture_default_str();
  cmd->add_option("--workers", flags->workers,
                  "Workers the local launcher starts (--strategy async|sync|allreduce)")
      ->capture_default_str();
  cmd->add_option("--max_restarts", flags->max_restarts,
                  "Crashed tasks the local launcher starts again (ps strategies: that task, "
                  "which reconnects; allreduce: the whole group, from the newest checkpoint)")
      ->capture_default_str();
  cmd->add_option("--ps_hosts", flags->ps_hosts, "Cluster: ps tasks, host:port,host:port");
  cmd->add_option("--worker_hosts", flags->worker_hosts,
                  "Cluster: workers, host:port,... (without --ps_hosts: an all-reduce ring)");
  cmd->add_option("--job_name", flags->job_name, "Cluster: this task's job, ps or worker");
  cmd->add_option("--rendezvous", flags->rendezvous,
                  "Under mpirun, srun or torchrun-style RANK/WORLD_SIZE: HOST:PORT where rank 0 "
                  "listens for the other ranks (default MASTER_ADDR:MASTER_PORT; under Slurm the "
                  "job's first node, port 29500)");
  cmd->add_option("--bind", flags->bind,
                  "Cluster: the address this task listens on (default: its own address in the "
                  "cluster spec when that is this host's, else every interface)");
  cmd->add_option("--task_index", flags->task_index, "Cluster: this task's index in its job")
      ->capture_default_str();
  cmd->add_option("--cluster", flags->cluster_file,
                  "Cluster: a JSON file shaped like TF_CONFIG (TF_CONFIG itself is read too)");
  cmd->add_option("--secret_file", flags->secret_file,
                  "File holding the cluster secret (default: $DTRAIN_SECRET)");
  cmd->add_flag("--unauthenticated_frames", flags->unauthenticated_frames,
                "Cluster: skip the per-frame authentication tag (a CRC only) after the handshake; "
                "every task must be given it, and each warns that its frames can be altered");
  cmd->add_flag("--sync_replicas", flags->sync_replicas,
                "Synchronous updates: aggregate --replicas_to_aggregate gradients per step");
  cmd->add_option("--replicas_to_aggregate", flags->replicas_to_aggregate,
                  "Sync: gradients averaged per step (default: all workers; fewer leaves "
                  "backup workers)");
  cmd->add_option("--total_num_replicas", flags->total_num_replicas,
                  "Sync: workers that push (default: all workers)");
  cmd->add_option("--placement", flags->placement, "balanced | round_robin")
      ->check(CLI::IsMember({"balanced", "round_robin"}))
      ->capture_default_str();
  cmd->add_option("--min_shard_bytes", flags->min_shard_bytes,
                  "balanced: variables above this are split over the ps tasks")
      ->capture_default_str();
  cmd->add_option("--peer_timeout", flags->peer_timeout,
                  "Seconds to wait for a peer: to connect, for the chief, for a sync step")
      ->capture_default_str();
  cmd->add_option("--worker_timeout", flags->worker_timeout,
                  "ps: seconds a lost worker (its connection closed before it was done) has to "
                  "come back before the ps goes on without it; also how long a ps waits, once "
                  "training is over, for a worker that never connected")
      ->capture_default_str();
  cmd->add_option("--liveness_timeout", flags->liveness_timeout,
                  "ps strategies: seconds without any answer from a peer's host, heartbeats "
                  "included, before it is declared lost (a dead machine or a cut link)")
      ->capture_default_str();
  cmd->add_option("--on_worker_loss", flags->on_worker_loss,
                  "sync ps, when a lost worker leaves too few for a step: stop (fail, naming it) "
                  "or continue (fewer gradients per step)")
      ->check(CLI::IsMember({"stop", "continue"}))
      ->capture_default_str();
  cmd->add_option("--step_delay_ms", flags->step_delay_ms,
                  "Sleep before each step: a deliberate straggler, to try backup workers");
  cmd->add_option("--fusion_bytes", flags->fusion_bytes,
                  "allreduce: all-reduce the gradients in buckets of at most this many bytes, "
                  "one after another (0: all of them in one buffer)")
      ->capture_default_str();
  cmd->add_option("--collective_timeout", flags->collective_timeout,
                  "allreduce: seconds to wait for the ring to form and for any message in it; a "
                  "lost or stuck worker fails every other, named, within this")
      ->capture_default_str();
  cmd->add_option("--transport", flags->transport,
                  "How payloads move between tasks on the same host (all-reduce chunks; a "
                  "worker's gradients and values to and from a ps): auto (copied straight out of "
                  "or into the other task's memory where the kernel allows it, else TCP), tcp, or "
                  "shm (memory only; a pair that cannot is an error)")
      ->check(CLI::IsMember({"auto", "tcp", "shm"}))
      ->capture_default_str();
}

void add_training_flags(CLI::App* cmd, TrainFlags* flags) {
  cmd->add_option("--model", flags->model,
                  "softmax | mlp | mnist_inference | lenet, or a Keras Sequential .json file")
      ->capture_default_str();
  cmd->add_option("--strategy", flags->strategy,
                  "local | towers | async | sync | allreduce (async and sync: parameter "
                  "servers; allreduce: workers average gradients over a ring)")
      ->check(CLI::IsMember({"local", "towers", "async", "sync", "allreduce"}))
      ->capture_default_str();
  cmd->add_option("--hidden_units", flags->hidden_units, "Hidden units of the mlp model")
      ->capture_default_str();
  cmd->add_option("--batch_size", flags->batch_size, "Examples per step (per worker)")
      ->capture_default_str();
  cmd->add_option("--learning_rate", flags->learning_rate,
                  "Initial learning rate (default: the model's recipe)");
  cmd->add_option("--lr_decay_rate", flags->lr_decay_rate,
                  "Exponential schedule: decay per --lr_decay_steps, staircase (1: none)");
  cmd->add_option("--lr_schedule", flags->lr_schedule,
                  "exponential (--lr_decay_rate per --lr_decay_steps), cosine (to --lr_alpha of "
                  "--learning_rate over --lr_decay_steps) or piecewise (--lr_values changing at "
                  "--lr_boundaries); formulas in docs/training.md")
      ->check(CLI::IsMember({"exponential", "cosine", "piecewise"}))
      ->capture_default_str();
  cmd->add_option("--lr_decay_steps", flags->lr_decay_steps,
                  "Exponential: steps per --lr_decay_rate (default: one epoch); cosine: steps to "
                  "reach --lr_alpha (default: the whole run)");
  cmd->add_option("--lr_alpha", flags->lr_alpha,
                  "Cosine: the final learning rate as a fraction of --learning_rate")
      ->capture_default_str();
  cmd->add_option("--lr_boundaries", flags->lr_boundaries,
                  "Piecewise: global steps where the rate changes, e.g. 1000,2000")
      ->delimiter(',');
  cmd->add_option("--lr_values", flags->lr_values,
                  "Piecewise: the rates, one more than boundaries, e.g. 0.1,0.01,0.001")
      ->delimiter(',');
  cmd->add_option("--lr_warmup_steps", flags->lr_warmup_steps,
                  "Linear warmup: the rate rises from 0 over these first global steps (any "
                  "--lr_schedule)")
      ->capture_default_str();
  cmd->add_option("--optimizer", flags->optimizer,
                  "sgd | momentum | adam (default: the model's recipe)");
  cmd->add_option(
      "--moving_average_decay", flags->moving_average_decay,
      "Evaluate on an exponential moving average of the weights with this decay (0: off)");
  cmd->add_option("--l2", flags->l2,
                  "L2 regularisation coefficient on weights (default: the model's)");
  cmd->add_option("--train_steps", flags->train_steps,
                  "Global step to stop at (overrides --epochs)");
  cmd->add_option("--epochs", flags->epochs, "Epochs to train (default: the model's recipe)");
  cmd->add_option("--data_dir", flags->data_dir,
                  "MNIST folder (default $DTRAIN_DATA_DIR or ~/.cache/dtrain/mnist)");
  cmd->add_option("--train_data", flags->train_data,
                  "Your training data: comma-separated files or globs (IDX, TFRecord of "
                  "tf.train.Example, CSV; .gz/.zlib compressed or not); needs --test_data");
  cmd->add_option("--test_data", flags->test_data, "Your test data, as --train_data");
  add_data_option_flags(cmd, &flags->data_options);
  cmd->add_option("--shuffle_buffer", flags->shuffle_buffer,
                  "Stream the --train_data files through a shuffle buffer of this many examples "
                  "(tf.data's shuffle) instead of holding them in memory (0: in memory)")
      ->capture_default_str();
  cmd->add_option("--train_dir", flags->train_dir,
                  "Checkpoints, metrics.jsonl and TensorBoard event files; a run resumes from its "
                  "newest checkpoint, and refuses one of other settings (see --resume, "
                  "--overwrite)");
  cmd->add_flag("--resume", flags->resume,
                "Go on from --train_dir's checkpoint although settings that change the result "
                "(learning rate, batch size, data, ...) differ from its run's");
  cmd->add_flag("--overwrite", flags->overwrite,
                "Delete --train_dir's checkpoints (and metrics.jsonl) and start afresh");
  cmd->add_option("--logdir", flags->logdir,
                  "TensorBoard event files (default: --train_dir): the chief's, and each "
                  "worker's in worker_<N>/");
  cmd->add_option("--summary_steps", flags->summary_steps,
                  "Histograms of every variable and averaged gradient every N global steps, in "
                  "the event files (0: none)")
      ->capture_default_str();
  cmd->add_option("--validation_size", flags->validation_size,
                  "Training examples held out as the validation set that --eval_every, "
                  "--target_accuracy and --early_stopping_patience judge (default 5000 of MNIST, "
                  "none of --train_data)")
      ->capture_default_str();
  cmd->add_option("--seed", flags->seed, "Seed of initialisation and shuffling")
      ->capture_default_str();
  cmd->add_option("--threads", flags->threads,
                  "Compute threads that split every large matrix product (default: the cores "
                  "this process may use)")
      ->capture_default_str();
  cmd->add_option("--towers", flags->towers,
                  "Model replicas on separate threads (--strategy towers)")
      ->capture_default_str();
  cmd->add_option("--log_every", flags->log_every,
                  "Print a step line every N steps, at least once an epoch (0: never)")
      ->capture_default_str();
  cmd->add_option("--log_secs", flags->log_secs,
                  "Print a step line also when S seconds have passed since the last (0: by "
                  "steps alone)")
      ->capture_default_str();
  cmd->add_option("--save_steps", flags->save_steps,
                  "Checkpoint every N steps (0: at the end only)")
      ->capture_default_str();
  cmd->add_option("--save_secs", flags->save_secs, "Checkpoint every S seconds (0: off)");
  cmd->add_option("--shutdown_timeout", flags->shutdown_timeout,
                  "On SIGTERM, SIGHUP or SIGINT: stop at the next step, the chief checkpoints, and "
                  "every task exits within this many seconds (a second signal: at once)")
      ->capture_default_str();
  cmd->add_option("--keep_checkpoints", flags->keep_checkpoints, "Checkpoints kept (0: all)")
      ->capture_default_str();
  cmd->add_option("--eval_every", flags->eval_every,
                  "Evaluate the validation set (--validation_size) every N steps (0: never); the "
                  "test set is evaluated once, at the end")
      ->capture_default_str();
  cmd->add_option("--target_accuracy", flags->target_accuracy,
                  "Stop once validation accuracy reaches this");
  cmd->add_option("--early_stopping_patience", flags->early_stopping_patience,
                  "Stop after N evaluations (--eval_every) without a lower validation loss, keep "
                  "the best weights in train_dir/best/ and evaluate them on the test set (0: off)")
      ->capture_default_str();
  cmd->add_flag("!--no_progress", flags->progress, "No progress bar even on a terminal");
  // The local launcher's word to its tasks that their output reaches a terminal through it.
  cmd->add_flag("--progress_through_launcher", flags->progress_through_launcher)->group("");
  cmd->add_option("--inject_nonfinite_at", flags->inject_nonfinite_at,
                  "Fault injection: put a NaN into this task's gradient at these of its own "
                  "steps (from 1), to watch it be refused")
      ->delimiter(',');
  add_cluster_flags(cmd, flags);
}

// train and task read a launcher's ranks alike; both say how in --help.
constexpr const char* kLauncherHelp =
    "\nUnder a launcher each process is one rank of one job: mpirun (Open MPI's "
    "OMPI_COMM_WORLD_RANK/SIZE, MPICH's PMI_RANK/PMI_SIZE), srun (SLURM_PROCID/SLURM_NTASKS) or "
    "torchrun-style RANK/WORLD_SIZE. The ranks meet at --rendezvous, else MASTER_ADDR:MASTER_PORT, "
    "else the Slurm job's first node, else 127.0.0.1 when every rank is on this host (port: "
    "MASTER_PORT or 29500). Every rank is an all-reduce worker, or --ps P makes ranks 0..P-1 ps "
    "tasks (--strategy async|sync). Every rank needs the same secret: export "
    "DTRAIN_SECRET=$(openssl rand -hex 32) before launching, or --secret_file FILE.";

}  // namespace

void add_train_command(CLI::App& app, Action& action) {
  auto flags = std::make_shared<TrainFlags>();
  CLI::App* cmd = app.add_subcommand(
      "train",
      "Train a model: locally (default), or a cluster on this machine (--strategy async|sync: "
      "parameter servers; allreduce: a ring of workers), or one task of a cluster given by "
      "flags/TF_CONFIG or a launcher's ranks (mpirun, srun, torchrun)");
  cmd->footer(kLauncherHelp);
  add_training_flags(cmd, flags.get());
  cmd->callback([cmd, flags, &action] {
    action = [cmd, flags] { return run_training(*cmd, *flags, /*task_only=*/false); };
  });
}

void add_task_command(CLI::App& app, Action& action) {
  auto flags = std::make_shared<TrainFlags>();
  CLI::App* cmd = app.add_subcommand(
      "task",
      "Run one task (ps or worker) of a cluster given by --ps_hosts/--worker_hosts/"
      "--job_name/--task_index, TF_CONFIG or --cluster; a cluster without ps tasks trains by "
      "all-reduce; or one rank of a launcher's job (mpirun, srun, torchrun)");
  cmd->footer(kLauncherHelp);
  add_training_flags(cmd, flags.get());
  cmd->callback([cmd, flags, &action] {
    action = [cmd, flags] { return run_training(*cmd, *flags, /*task_only=*/true); };
  });
}

}  // namespace dtrain::cli
