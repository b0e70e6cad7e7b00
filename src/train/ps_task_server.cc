// A ps task's service, restored and served: with the settings of its own flags where they name a
// model, else with the chief's, as a TensorFlow ps started with only the cluster flags.
#include "train/ps_task_server.h"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <optional>
#include <utility>

#include "base/error.h"
#include "ckpt/checkpoint_manager.h"
#include "ckpt/param_set_checkpoint.h"
#include "cluster/bind_address.h"
#include "metrics/metrics_endpoint.h"
#include "nn/model_zoo.h"
#include "ps/job_settings.h"
#include "ps/ps_metrics.h"
#include "ps/ps_protocol.h"
#include "train/ps_job_settings.h"

namespace dtrain {

namespace {

// A ps task that finds a checkpoint in --train_dir starts from it: after a crash it comes back
// with the newest values and optimizer state the chief saved, and the workers, reconnecting,
// carry on from there (the steps after that checkpoint are lost, and they say how many). On the
// first start of a run that resumes, the chief finds the ps already initialised from the same
// checkpoint and leaves it be. The tensors are read by name for `options`' layout and optimizer.
std::optional<PsRestoredState> restored_shards(const TrainConfig& train, int ps,
                                               const std::string& model,
                                               const PsServiceOptions& options, std::ostream& out) {
  if (train.train_dir.empty() || !std::filesystem::is_directory(train.train_dir)) {
    return std::nullopt;
  }
  const CheckpointManager checkpoints(train.train_dir, train.keep_checkpoints);
  const CheckpointManager::RestoreResult restored = checkpoints.restore_latest();
  for (const std::string& skipped : restored.skipped)
    fmt::print(out, "ps{}: skipped checkpoint {}\n", ps, skipped);
  if (!restored.checkpoint) return std::nullopt;
  const Checkpoint& checkpoint = *restored.checkpoint;
  if (checkpoint.model != model) {
    throw CheckpointError(
        fmt::format("{}: holds model '{}', but the job trains '{}'; use another --train_dir",
                    restored.path.string(), checkpoint.model, model));
  }
  PsRestoredState state{
      .params = ParamSet(options.specs), .slots = {}, .step = checkpoint.global_step};
  load_tensors(checkpoint, state.params);
  const auto optimizer = make_optimizer(options.optimizer, options.specs);
  for (ParamSet& slot : optimizer->slots()) {
    load_tensors(checkpoint, slot);
    state.slots.push_back(std::move(slot));
  }
  fmt::print(out, "ps{}: restored {} at global step {}\n", ps, restored.path.string(),
             checkpoint.global_step);
  out << std::flush;
  return state;
}

// What the task is given whatever the job trains: its place, server, waits and stop.
PsServiceOptions task_options(const TrainConfig& train, const PsClusterConfig& config,
                              const BindAddress& bind) {
  PsServiceOptions options;
  options.ps = config.cluster.task.index;
  std::vector<std::string> ps_hosts;
  for (const HostPort& task : config.cluster.cluster.tasks(kPsJob))
    ps_hosts.push_back(task.to_string());
  options.ps_hosts = fmt::format("{}", fmt::join(ps_hosts, ","));
  const HostPort& own = config.cluster.cluster.address(config.cluster.task);
  options.server.bind_host = bind.host;
  options.server.port = own.port;
  options.server.secret = config.secret;
  options.server.connection.liveness_timeout_ms = config.liveness_timeout_ms;
  options.server.connection.authenticate_frames = config.cluster.authenticate_frames;
  options.server.connection.tcp_congestion = config.cluster.tcp_congestion;
  options.server.connection.identity = ps_protocol::ps_identity(options.ps);
  options.sync_wait_ms = config.peer_timeout_ms;
  options.stall_warning_ms = config.stall_warning_ms;
  options.transport = config.transport;
  options.worker_timeout_ms = config.worker_timeout_ms;
  options.on_worker_loss = config.on_worker_loss;
  options.stop = train.stop;
  options.shutdown_timeout_ms = train.shutdown_timeout_ms;
  options.wait_report_interval_ms = config.wait_report_interval_ms;
  return options;
}

// Where the task learns what the job trains from the chief: the flags it was given, checked.
bool learns_from_chief(const PsClusterConfig& config) {
  return config.given_flags && !names_a_model(*config.given_flags);
}

}  // namespace

PsTaskServer::PsTaskServer(const TrainConfig& train, const PsClusterConfig& config,
                           std::ostream& out)
    : train_(train), out_(out), ps_(config.cluster.task.index) {
  const HostPort& own = config.cluster.cluster.address(config.cluster.task);
  const BindAddress bind = bind_address_for(own, config.cluster.bind_host);
  PsServiceOptions options = task_options(train, config, bind);
  std::optional<PsRestoredState> restored;
  const bool learns = learns_from_chief(config);
  if (!learns) {
    const auto model = make_model(train.model);
    model_ = model->name();
    adopt_ps_job_settings(
        ps_job_settings(model_, model->param_specs(), train.precision, train.optimizer, config),
        config, options);
    restored = restored_shards(train, ps_, model_, options, out);
  } else {
    options.on_configured = [this](const PsServiceOptions& o) { say_serving(o); };
    const nlohmann::json own_settings = given_settings(
        ps_job_settings("", {}, train.precision, train.optimizer, config), *config.given_flags);
    options.learn = [this, config, own_settings](const nlohmann::json& chief,
                                                 PsServiceOptions& into) {
      if (const auto difference = settings_difference(own_settings, chief)) {
        const std::string path = difference->substr(0, difference->find(' '));
        throw Error(fmt::format(
            "the chief trains with another {} than this task was started with {}; give it the "
            "same {}, or leave the flag out here",
            path, difference->substr(path.size() + 1), settings_flag(path)));
      }
      const std::string model = adopt_ps_job_settings(chief, config, into);
      model_ = model;
      return restored_shards(train_, ps_, model, into, out_);
    };
  }
  const PsServiceOptions given = options;
  service_ = std::make_unique<PsService>(std::move(options), restored ? &*restored : nullptr);
  restored.reset();  // the store holds it now
  fmt::print(out, "ps{}: listening on {}:{} ({})\n", ps_, bind.host, port(), bind.why);
  if (!learns) {
    say_serving(given);
  } else {
    fmt::print(out,
               "ps{}: serves what the chief (worker 0) trains, once it says it: the model, "
               "optimizer and sync settings the chief was started with{}\n",
               ps_, config.given_flags->empty() ? "" : " (the flags given here are checked)");
  }
  out << std::flush;
  if (train.metrics_port >= 0) {
    metrics_ =
        std::make_unique<MetricsEndpoint>(bind.host, train.metrics_port, fmt::format("ps{}", ps_));
    metrics_->add(std::make_shared<PsMetrics>(
        *service_, fmt::format("ps{}", ps_),
        static_cast<int>(training_workers(config.cluster.cluster).size())));
    fmt::print(out, "ps{}: metrics at {}\n", ps_, metrics_->url());
  }
  out << std::flush;
}

PsTaskServer::~PsTaskServer() = default;

void PsTaskServer::say_serving(const PsServiceOptions& o) {
  const int ps = ps_;
  fmt::print(out_, "ps{}: serving {} shards ({:.1f} KiB) of {}, {} for {} workers{}{}\n", ps,
             o.map.shards_of_ps[static_cast<size_t>(ps)].size(), o.map.bytes_on(ps) / 1024.0,
             model_, o.sync.sync_replicas ? "sync" : "async", o.sync.total_num_replicas,
             o.sync.sync_replicas
                 ? fmt::format(", {} gradients per step", o.sync.replicas_to_aggregate)
                 : "",
             o.min_workers > 0 && o.sync.sync_replicas
                 ? fmt::format(" (elastic: fewer while {} or more remain)", o.min_workers)
                 : "");
  out_ << std::flush;
}

int PsTaskServer::serve() {
  service_->run();
  service_->print_summary(out_);
  if (train_.stop == nullptr || !train_.stop->requested()) return 0;
  fmt::print(out_, "ps{}: stopped by {}\n", ps_, signal_name(train_.stop->signal()));
  out_ << std::flush;
  return 128 + train_.stop->signal();
}

}  // namespace dtrain
