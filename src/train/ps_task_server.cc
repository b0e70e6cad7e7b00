// A ps task's service, restored and served.
#include "train/ps_task_server.h"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <optional>
#include <utility>

#include "base/error.h"
#include "ckpt/checkpoint_manager.h"
#include "cluster/bind_address.h"
#include "metrics/metrics_endpoint.h"
#include "nn/model_zoo.h"
#include "ps/ps_metrics.h"
#include "ps/ps_protocol.h"
#include "train/training_state.h"

namespace dtrain {

namespace {

// A ps task that finds a checkpoint in --train_dir starts from it: after a crash it comes back
// with the newest values and optimizer state the chief saved, and the workers, reconnecting,
// carry on from there (the steps after that checkpoint are lost, and they say how many). On the
// first start of a run that resumes, the chief finds the ps already initialised from the same
// checkpoint and leaves it be.
std::optional<PsRestoredState> restored_shards(const TrainConfig& train, int ps,
                                               std::ostream& out) {
  if (train.train_dir.empty() || !std::filesystem::is_directory(train.train_dir)) {
    return std::nullopt;
  }
  TrainingState state(train);
  const CheckpointManager checkpoints(train.train_dir, train.keep_checkpoints);
  const auto step = restore_newest(checkpoints, state, fmt::format("ps{}", ps), out);
  out << std::flush;
  if (!step) return std::nullopt;
  return PsRestoredState{std::move(state.params()), std::move(state.optimizer().slots()), *step};
}

}  // namespace

PsTaskServer::PsTaskServer(const TrainConfig& train, const PsClusterConfig& config,
                           std::ostream& out)
    : train_(train), out_(out), ps_(config.cluster.task.index) {
  const int ps = ps_;
  const auto model = make_model(train.model);
  const ParamSet layout(model->param_specs());
  PsServiceOptions options;
  options.ps = ps;
  options.specs = model->param_specs();
  options.map = partition_for(layout, config);
  options.optimizer = train.optimizer;
  options.sync = resolve_sync(config);
  // An async job that takes joining workers holds room for --max_workers of them.
  if (!options.sync.sync_replicas && config.max_workers > options.sync.total_num_replicas) {
    options.planned_workers = options.sync.total_num_replicas;
    options.sync.total_num_replicas = config.max_workers;
  }
  std::vector<std::string> ps_hosts;
  for (const HostPort& task : config.cluster.cluster.tasks(kPsJob))
    ps_hosts.push_back(task.to_string());
  options.ps_hosts = fmt::format("{}", fmt::join(ps_hosts, ","));
  const HostPort& own = config.cluster.cluster.address(config.cluster.task);
  const BindAddress bind = bind_address_for(own, config.cluster.bind_host);
  options.server.bind_host = bind.host;
  options.server.port = own.port;
  options.server.secret = config.secret;
  options.server.connection.liveness_timeout_ms = config.liveness_timeout_ms;
  options.server.connection.authenticate_frames = config.cluster.authenticate_frames;
  options.server.connection.tcp_congestion = config.cluster.tcp_congestion;
  options.server.connection.identity = ps_protocol::ps_identity(ps);
  options.sync_wait_ms = config.peer_timeout_ms;
  options.stall_warning_ms = config.stall_warning_ms;
  options.transport = config.transport;
  options.worker_timeout_ms = config.worker_timeout_ms;
  options.on_worker_loss = config.on_worker_loss;
  options.min_workers = config.min_workers;
  options.stop = train.stop;
  options.shutdown_timeout_ms = train.shutdown_timeout_ms;
  options.wait_report_interval_ms = config.wait_report_interval_ms;
  std::optional<PsRestoredState> restored = restored_shards(train, ps, out);
  service_ = std::make_unique<PsService>(options, restored ? &*restored : nullptr);
  restored.reset();  // the store holds it now
  fmt::print(out, "ps{}: listening on {}:{} ({})\n", ps, bind.host, port(), bind.why);
  fmt::print(out, "ps{}: serving {} shards ({:.1f} KiB) of {} on port {}, {} for {} workers{}{}\n",
             ps, options.map.shards_of_ps[static_cast<size_t>(ps)].size(),
             options.map.bytes_on(ps) / 1024.0, model->name(), port(),
             options.sync.sync_replicas ? "sync" : "async", options.sync.total_num_replicas,
             options.sync.sync_replicas
                 ? fmt::format(", {} gradients per step", options.sync.replicas_to_aggregate)
                 : "",
             options.min_workers > 0 && options.sync.sync_replicas
                 ? fmt::format(" (elastic: fewer while {} or more remain)", options.min_workers)
                 : "");
  if (train.metrics_port >= 0) {
    metrics_ =
        std::make_unique<MetricsEndpoint>(bind.host, train.metrics_port, fmt::format("ps{}", ps));
    metrics_->add(std::make_shared<PsMetrics>(
        *service_, fmt::format("ps{}", ps),
        options.planned_workers > 0 ? options.planned_workers : options.sync.total_num_replicas));
    fmt::print(out, "ps{}: metrics at {}\n", ps, metrics_->url());
  }
  out << std::flush;
}

PsTaskServer::~PsTaskServer() = default;

int PsTaskServer::serve() {
  service_->run();
  service_->print_summary(out_);
  if (train_.stop == nullptr || !train_.stop->requested()) return 0;
  fmt::print(out_, "ps{}: stopped by {}\n", ps_, signal_name(train_.stop->signal()));
  out_ << std::flush;
  return 128 + train_.stop->signal();
}

}  // namespace dtrain
