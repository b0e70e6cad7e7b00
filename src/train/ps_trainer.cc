// The ps strategies' tasks: a ps task's service, and a worker's Strategy for the training loop.
#include "train/ps_trainer.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <optional>

#include "base/crc32c.h"
#include "base/error.h"
#include "base/log.h"
#include "ckpt/checkpoint_manager.h"
#include "cluster/bind_address.h"
#include "nn/model_zoo.h"
#include "ps/ps_client.h"
#include "ps/ps_protocol.h"
#include "ps/ps_service.h"
#include "tensor/blas.h"
#include "tensor/ops.h"
#include "train/fault_injection.h"
#include "train/strategy.h"
#include "train/training_input.h"
#include "train/training_loop.h"
#include "train/training_state.h"

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The sync options with defaults resolved against the cluster, checked.
SyncOptions resolve_sync(const PsClusterConfig& config) {
  SyncOptions sync = config.sync;
  const int workers = static_cast<int>(training_workers(config.cluster.cluster).size());
  if (sync.total_num_replicas == 0) sync.total_num_replicas = workers;
  if (sync.total_num_replicas != workers) {
    throw UsageError(fmt::format(
        "--total_num_replicas {}: the cluster has {} training workers; give {} or leave it out",
        sync.total_num_replicas, workers, workers));
  }
  if (sync.replicas_to_aggregate < 0 || sync.replicas_to_aggregate > workers) {
    throw UsageError(fmt::format("--replicas_to_aggregate {}: must be in 1..{} (the workers)",
                                 sync.replicas_to_aggregate, workers));
  }
  if (sync.replicas_to_aggregate == 0) sync.replicas_to_aggregate = workers;
  return sync;
}

PartitionMap partition_for(const ParamSet& layout, const PsClusterConfig& config) {
  return make_partition(layout, static_cast<int>(config.cluster.cluster.tasks("ps").size()),
                        config.placement, config.min_shard_bytes, config.max_shard_bytes);
}

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

int run_ps(const TrainConfig& train, const PsClusterConfig& config, std::ostream& out) {
  const int ps = config.cluster.task.index;
  const auto model = make_model(train.model);
  const ParamSet layout(model->param_specs());
  PsServiceOptions options;
  options.ps = ps;
  options.specs = model->param_specs();
  options.map = partition_for(layout, config);
  options.optimizer = train.optimizer;
  options.sync = resolve_sync(config);
  const HostPort& own = config.cluster.cluster.address(config.cluster.task);
  const BindAddress bind = bind_address_for(own, config.cluster.bind_host);
  options.server.bind_host = bind.host;
  options.server.port = own.port;
  options.server.secret = config.secret;
  options.server.connection.liveness_timeout_ms = config.liveness_timeout_ms;
  options.server.connection.authenticate_frames = config.cluster.authenticate_frames;
  options.server.connection.identity = ps_protocol::ps_identity(ps);
  options.sync_wait_ms = config.peer_timeout_ms;
  options.transport = config.transport;
  options.worker_timeout_ms = config.worker_timeout_ms;
  options.on_worker_loss = config.on_worker_loss;
  options.stop = train.stop;
  options.shutdown_timeout_ms = train.shutdown_timeout_ms;
  options.wait_report_interval_ms = config.wait_report_interval_ms;
  std::optional<PsRestoredState> restored = restored_shards(train, ps, out);
  PsService service(options, restored ? &*restored : nullptr);
  restored.reset();  // the store holds it now
  fmt::print(out, "ps{}: listening on {}:{} ({})\n", ps, bind.host, service.port(), bind.why);
  fmt::print(out, "ps{}: serving {} shards ({:.1f} KiB) of {} on port {}, {} for {} workers{}\n",
             ps, options.map.shards_of_ps[static_cast<size_t>(ps)].size(),
             options.map.bytes_on(ps) / 1024.0, model->name(), service.port(),
             options.sync.sync_replicas ? "sync" : "async", options.sync.total_num_replicas,
             options.sync.sync_replicas
                 ? fmt::format(", {} gradients per step", options.sync.replicas_to_aggregate)
                 : "");
  out << std::flush;
  service.run();
  service.print_summary(out);
  if (train.stop == nullptr || !train.stop->requested()) return 0;
  fmt::print(out, "ps{}: stopped by {}\n", ps, signal_name(train.stop->signal()));
  out << std::flush;
  return 128 + train.stop->signal();
}

// One worker of the ps strategies. A step is compute (on this worker's slice of the global batch)
// then one push-pull, which sends the gradient shard by shard and receives each shard's values
// after the update in the same round trip; the step's learning rate comes from the global step,
// so every worker follows one schedule. The chief initialises (or restores) the ps tasks and
// checkpoints what they hold; the others wait for it.
class PsStrategy final : public Strategy {
 public:
  PsStrategy(const TrainConfig& train, const PsClusterConfig& config, const TrainingState& state,
             std::ostream& out)
      : c_(train),
        config_(config),
        out_(out),
        sync_(resolve_sync(config)),
        rank_(worker_rank(config.cluster.cluster, config.cluster.task)),
        workers_(static_cast<int>(training_workers(config.cluster.cluster).size())),
        chief_(is_chief(config.cluster.cluster, config.cluster.task)),
        map_(partition_for(state.params(), config)) {}

  WorkerPlace place() const override {
    return {.rank = rank_, .workers = workers_, .chief = chief_, .distributed = true};
  }
  std::string describe() const override {
    return fmt::format("{} ps, {} ps task(s), {} workers{}", sync_.sync_replicas ? "sync" : "async",
                       config_.cluster.cluster.num_tasks(kPsJob), workers_,
                       sync_.sync_replicas
                           ? fmt::format(", {} gradients per step", sync_.replicas_to_aggregate)
                           : "");
  }
  // Async: every worker's batch is a global step. Sync: one global step takes a batch from each
  // worker.
  int64_t global_steps_per_epoch(int64_t batches_per_epoch) const override {
    return sync_.sync_replicas ? batches_per_epoch : batches_per_epoch * workers_;
  }
  int64_t batch_index_at(int64_t step) const override {
    return sync_.sync_replicas ? step : step / workers_;
  }

  int64_t start(TrainingState& state, const Restore& restore) override {
    print_start_line(state);
    PsClientOptions options;
    options.ps = config_.cluster.cluster.tasks("ps");
    options.secret = config_.secret;
    options.connection.connect_timeout_ms = config_.peer_timeout_ms;
    options.connection.liveness_timeout_ms = config_.liveness_timeout_ms;
    options.connection.authenticate_frames = config_.cluster.authenticate_frames;
    options.connection.wait_report_interval_ms = config_.wait_report_interval_ms;
    options.connection.stop = c_.stop;
    options.worker = rank_;
    // The chief keeps the newest values it was sent: with them it re-seeds a ps that comes back
    // without a checkpoint to restore, so that a killed ps does not end a run under default flags.
    if (chief_) options.reseed_from = &state.params();
    options.transport = config_.transport;
    options.report = [this](const std::string& line) {
      fmt::print(out_, "{}: {}\n", name(), line);
      out_ << std::flush;
    };
    client_.emplace(state.params(), map_, options);
    fmt::print(out_, "{}: connected to {} ps task(s) as worker {}\n", name(), options.ps.size(),
               rank_);
    print_payload_paths(options.ps.size());
    bool restored = false;
    if (chief_) {
      restored = initialize_or_restore(state, restore);
    } else {
      wait_for_chief();
    }
    client_->pull(state.params());
    // A restored chief keeps the checkpoint's moving average; otherwise it starts from the values
    // every worker has just pulled.
    if (!restored && state.moving_average() != nullptr)
      state.moving_average()->reset(state.params());
    state.step = client_->global_step();
    return state.step;
  }

  // The gradient stays in state.grads(): it is what this worker pushed.
  float step(TrainingState& state, GradientComputer& computer, const Batch& batch, float lr,
             int64_t local_step, bool /*keep_gradient*/) override {
    const float loss = computer.compute(state.params(), batch, state.grads());
    inject_nonfinite_gradient(c_, local_step, state.grads());
    push_pull_if_finite(state, lr, local_step);
    state.step = client_->global_step();
    if (MovingAverage* average = state.moving_average())
      average->update(state.params(), state.step);
    return loss;
  }

  bool finished() const override { return client_->finished(); }

  // The ps tasks still reachable learn that this worker ends with an error.
  void report_failure(const std::string& why) {
    if (client_) client_->report_failure(why);
  }

  // The chief's own verdict: the others learn of it from the ps tasks, which the chief tells at
  // its finish that training is over (a sync step would otherwise wait for it for ever).
  StopVerdict agree_to_stop(StopVerdict verdict) override { return verdict; }

  void before_checkpoint(TrainingState& state) override {
    client_->pull_state(state.params(), state.optimizer().slots());
  }

  // The last values (and, for the chief's checkpoint, slots) before saying done: the ps tasks exit
  // once every worker has. Telling them at once matters for a chief that stopped at its target:
  // the others stop when the ps tasks pass the word on, at their next push.
  // The ps tasks stopping (a signal of theirs) stop this worker too, as SIGTERM would.
  int agree_to_halt(int own_signal) override {
    if (own_signal != 0) return own_signal;
    return client_->halting() ? SIGTERM : 0;
  }

  void finish(TrainingState& state, bool reached_end) override {
    if (chief_) {
      client_->pull_state(state.params(), state.optimizer().slots());
    } else {
      client_->pull(state.params());
    }
    params_crc_ = crc32c(std::as_bytes(std::span<const float>(state.params().flat())));
    done_ = client_->worker_done(reached_end);
  }

  // One round trip to every ps task per step line.
  std::vector<std::pair<std::string, double>> run_scalars() override {
    if (!chief_) return {};
    const ps_protocol::DoneReply c = client_->counters();
    return {{"ps/stale_gradients", static_cast<double>(c.stale_dropped)},
            {"ps/duplicate_pushes", static_cast<double>(c.duplicates)},
            {"ps/non_finite_gradients", static_cast<double>(c.rejected)}};
  }

  std::string counters() const override {
    return fmt::format("{} rounds with a stale gradient, {} with a non-finite one", stale_rounds_,
                       nonfinite_rounds_);
  }

  void print_summary(std::ostream& out, const RunFigures& f) const override {
    // The values this worker last pulled, to the bit: what tests compare across runs and
    // transports.
    fmt::print(out, "worker={}: parameters crc32c = 0x{:08X}\n", rank_, params_crc_);
    if (!chief_) return;
    const int64_t per_step = sync_.sync_replicas ? sync_.replicas_to_aggregate : 1;
    const int64_t steps = done_.step - f.first_step;
    const double s = f.train_seconds;
    fmt::print(out,
               "aggregate: {} global steps in {:.3f} s, {:.1f} examples/sec over {} workers; ps "
               "tasks dropped {} stale gradients and {} duplicate pushes, and rejected {} "
               "non-finite gradients\n",
               steps, s, s > 0 ? steps * per_step * f.batch_size / s : 0.0, workers_,
               done_.stale_dropped, done_.duplicates, done_.rejected);
  }

 private:
  std::string name() const { return fmt::format("worker{}", rank_); }

  // Which way gradients and values travel to each ps: the honest answer to "is this run using
  // memory or TCP?"
  void print_payload_paths(size_t ps_tasks) {
    std::string paths;
    bool memory = false;
    for (size_t p = 0; p < ps_tasks; ++p) {
      const PayloadPath path = client_->payload_path(static_cast<int>(p));
      memory = memory || path.memory;
      paths += fmt::format("{}ps{}: {}", p == 0 ? "" : "; ", p,
                           path.memory            ? "shm"
                           : path.why_not.empty() ? "tcp"
                                                  : fmt::format("tcp ({})", path.why_not));
    }
    if (memory) {
      paths +=
          " (shm: the ps copies the gradients out of this worker's memory and the values "
          "into it)";
    }
    fmt::print(out_, "worker={}: transport to {}\n", rank_, paths);
    out_ << std::flush;
  }

  void print_start_line(const TrainingState& state) {
    fmt::print(out_, "{}: {} training of {} ({} parameters), batch {} on slice {} of {}{}\n",
               name(), sync_.sync_replicas ? "sync" : "async", state.model().name(),
               state.params().num_values(), c_.batch_size, rank_, workers_,
               chief_ ? " (chief)" : "");
    out_ << std::flush;
  }

  // Returns whether the state came from a checkpoint.
  bool initialize_or_restore(TrainingState& state, const Restore& restore) {
    if (client_->initialized_at_hello()) {
      // A restarted chief: the ps tasks hold newer values than any checkpoint.
      fmt::print(out_, "{}: the ps tasks already hold the variables; not re-initialising\n",
                 name());
      out_ << std::flush;
      return false;
    }
    state.initialize(c_.seed);
    const std::optional<int64_t> step = restore();
    client_->initialize(state.params(), step ? state.optimizer().slots() : std::vector<ParamSet>{},
                        step.value_or(0));
    out_ << std::flush;
    return step.has_value();
  }

  void wait_for_chief() {
    const auto start = Clock::now();
    const int slice_ms = std::min(5000, config_.wait_report_interval_ms);  // how often it says so
    while (!client_->wait_ready(slice_ms)) {
      const double waited = seconds(Clock::now() - start);
      if (c_.stop != nullptr && c_.stop->requested()) {
        throw StopRequested(fmt::format("stopped by {} while waiting for the chief to initialise "
                                        "the ps tasks",
                                        signal_name(c_.stop->signal())),
                            c_.stop->signal());
      }
      if (waited * 1000 >= config_.peer_timeout_ms) {
        throw Error(fmt::format("{}: the chief did not initialise the ps tasks within {} s", name(),
                                config_.peer_timeout_ms / 1000));
      }
      fmt::print(out_,
                 "{}: waiting for the chief to initialise the ps tasks ({:.0f} s; {:.0f} s left)\n",
                 name(), waited, config_.peer_timeout_ms / 1000.0 - waited);
      out_ << std::flush;
    }
  }

  // A gradient with a NaN or an infinity is held back whole: the ps tasks would reject only the
  // shards that hold one and apply the rest, a partial update (and, in sync mode, a worker that
  // counts towards a step on some shards but not on others). The ps tasks reject any that arrives
  // all the same, from a worker that does not check; both are counted and reported. Sync: the
  // next gradient is still computed at this step, so it takes this one's place.
  void push_pull_if_finite(TrainingState& state, float lr, int64_t local_step) {
    if (!all_finite(state.grads().flat())) {
      ++nonfinite_rounds_;
      spdlog::warn(
          "{}: held back the gradient of local step {} at global step {}: it holds a NaN or an "
          "infinity ({} so far); the ps values are unchanged",
          name(), local_step, client_->global_step(), nonfinite_rounds_);
      return;
    }
    const RoundOutcome outcome = client_->push_pull(state.grads(), state.params(), lr);
    stale_rounds_ += outcome.stale > 0 ? 1 : 0;
    nonfinite_rounds_ += outcome.rejected > 0 ? 1 : 0;
  }

  const TrainConfig& c_;
  const PsClusterConfig& config_;
  std::ostream& out_;
  const SyncOptions sync_;
  const int rank_;
  const int workers_;
  const bool chief_;
  PartitionMap map_;
  std::optional<PsClient> client_;
  ps_protocol::DoneReply done_;
  int64_t stale_rounds_ = 0;
  int64_t nonfinite_rounds_ = 0;  // gradients held back, or rejected by a ps
  uint32_t params_crc_ = 0;       // of the values pulled at the end
};

}  // namespace

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
  if (task.job == "ps") return run_ps(train, config, out);
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
