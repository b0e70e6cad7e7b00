// The allreduce strategy's worker. A step is compute (on this worker's slice of the global batch),
// then one average all-reduce per fusion bucket of the gradient arena, then the optimizer applied
// locally. Rank 0 alone initialises or restores, broadcasts the whole training state before the
// first step, and decides when a target accuracy ends the run, so every rank runs the same
// sequence of collectives and holds the same parameters.
#include "train/allreduce_trainer.h"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <csignal>
#include <optional>
#include <span>

#include "base/crc32c.h"
#include "base/error.h"
#include "base/log.h"
#include "cluster/bind_address.h"
#include "collective/communicator.h"
#include "collective/tcp_ring.h"
#include "data/dataset.h"
#include "nn/model_zoo.h"
#include "tensor/ops.h"
#include "train/fault_injection.h"
#include "train/strategy.h"
#include "train/training_input.h"
#include "train/training_loop.h"
#include "train/training_state.h"

namespace dtrain {
namespace {

constexpr size_t kUpdateChunkFloats = 8192;  // 32 KiB of each arena: L1-sized

// FNV-1a, 64 bits: the same value on every platform and compiler, unlike std::hash.
uint64_t fnv1a(std::string_view text) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

template <typename T>
uint32_t crc_of(std::span<const T> values, uint32_t crc = 0) {
  return crc32c(std::as_bytes(values), crc);
}

// What every worker must agree on: anything that changes the parameters' trajectory (layout,
// optimizer, schedule, the data and its order) or the sequence and lengths of the collectives
// (steps, evaluations that may stop the run, buckets, chunks). Threads, towers, logging and
// checkpointing are each worker's own business. The ring refuses a neighbour whose fingerprint
// differs, by name, instead of letting it train something else or desynchronise the collectives.
std::string agreed_settings(const TrainConfig& c, const AllreduceClusterConfig& config,
                            const Model& model, const ParamSet& layout, const TrainingInput& input,
                            int64_t total_steps) {
  // The whole architecture, activations and dropout included, not just the parameters' shapes.
  std::string text = fmt::format("model {} spec {} l2 {};", c.model.name,
                                 model_spec_json(c.model).dump(), model.l2());
  for (const ParamSpec& spec : layout.specs())
    text += fmt::format(" {}[{}]", spec.name, fmt::join(spec.shape, ","));
  const OptimizerConfig& o = c.optimizer;
  text += fmt::format(
      "; optimizer {} momentum {} nesterov {} beta1 {} beta2 {} epsilon {}; batch {} lr {} "
      "decay {} per {} staircase {} schedule {} alpha {} boundaries {} values {} warmup {}; steps "
      "{} seed {}; moving average {} eval on it {}; eval every {} target {} patience {}; fusion {} "
      "chunk {}",
      o.name, o.momentum, o.use_nesterov, o.beta1, o.beta2, o.epsilon, c.batch_size,
      c.learning_rate, c.lr_decay_rate, c.lr_decay_steps, c.lr_staircase,
      lr_decay_name(c.lr_schedule), c.lr_alpha, fmt::join(c.lr_boundaries, ","),
      fmt::join(c.lr_values, ","), c.lr_warmup_steps, total_steps, c.seed, c.moving_average_decay,
      c.eval_moving_average, c.eval_every,
      c.target_accuracy ? fmt::format("{}", *c.target_accuracy) : "none", c.early_stopping_patience,
      config.fusion_bytes, config.chunk_bytes);
  // The examples themselves, not the folder's name (streamed files: their names and sizes).
  text += fmt::format("; train data {} examples crc {:08x} shuffle buffer {}",
                      input.train_examples(), input.fingerprint(), c.shuffle_buffer);
  return text;
}

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

// One worker of the ring: a step is compute (on this worker's slice of the global batch), then one
// average all-reduce per fusion bucket of the gradient arena, then the optimizer applied locally.
// Rank 0 alone initialises or restores, broadcasts the whole training state before the first
// step, and decides when a target accuracy ends the run, so every rank runs the same sequence of
// collectives and holds the same parameters.
class AllreduceStrategy final : public Strategy {
 public:
  AllreduceStrategy(const TrainConfig& train, const AllreduceClusterConfig& config,
                    TrainingState& state, const TrainingInput& input, std::ostream& out)
      : c_(train),
        config_(config),
        out_(out),
        rank_(worker_rank(config.cluster.cluster, config.cluster.task)),
        workers_(training_workers(config.cluster.cluster)) {
    // A global step takes one batch from every worker: an epoch is a shard's batches of them.
    const int64_t batches_per_epoch = input.train_examples() / (int64_t{train.batch_size} * size());
    total_steps_ = total_global_steps(train, batches_per_epoch);
    for (const ArenaSlice& slice : fusion_buckets(state.grads(), config.fusion_bytes))
      buckets_.push_back(state.grads().flat().subspan(slice.begin, slice.size));
    settings_ = agreed_settings(train, config, state.model(), state.params(), input, total_steps_);
    const HostPort& own = config.cluster.cluster.address(config.cluster.task);
    const BindAddress bind = bind_address_for(own, config.cluster.bind_host);
    fmt::print(out_, "worker={}: listening on {}:{} ({})\n", rank_, bind.host, own.port, bind.why);
    ring_.emplace(
        TcpRingOptions{.size = size(),
                       .rank = rank_,
                       .bind_host = bind.host,
                       .port = own.port,
                       .secret = config.secret,
                       .authenticate_frames = config.cluster.authenticate_frames,
                       .fingerprint = fnv1a(settings_),
                       .timeout_ms = config.collective_timeout_ms,
                       .spin_us = ring_spin_us(workers_on_host(own.host), config.transport),
                       .job = rank_prefix(),
                       .transport = config.transport,
                       .stop = train.stop,
                       .wait_report = [this](const std::string& line) {
                         fmt::print(out_, "{}: {}\n", name(), line);
                         out_ << std::flush;
                       }});
    communicator_.emplace(*ring_, CollectiveOptions{.max_chunk_bytes = config.chunk_bytes});
  }

  // The others would otherwise learn of a failure only from the broken connections, or from the
  // timeout if this process lingered. A ring that failed by itself keeps its own message.
  void abort(const std::string& why) { ring_->abort(fmt::format("{} stopped: {}", name(), why)); }

  WorkerPlace place() const override {
    return {.rank = rank_, .workers = size(), .chief = chief(), .distributed = true};
  }
  std::string describe() const override { return fmt::format("allreduce, {} workers", size()); }

  int64_t start(TrainingState& state, const Restore& restore) override {
    print_start_line(state);
    const TaskId& right = workers_[static_cast<size_t>((rank_ + 1) % size())];
    ring_->connect(config_.cluster.cluster.address(right));
    print_links();
    if (chief()) {
      state.initialize(c_.seed);
      if (const auto step = restore()) state.step = *step;
    }
    share_state(state);
    return state.step;
  }

  // The steady state: no allocation; the buckets are views of the gradient arena, all-reduced in
  // place, and the all-reduce leaves the same bits on every rank, so every rank's optimizer makes
  // the same update.
  float step(TrainingState& state, GradientComputer& computer, const Batch& batch, float lr,
             int64_t local_step, bool /*keep_gradient*/) override {
    const float loss = computer.compute(state.params(), batch, state.grads());
    inject_nonfinite_gradient(c_, local_step, state.grads());
    for (const std::span<float> bucket : buckets_)
      communicator_->allreduce(bucket, ReduceOp::kAverage);
    // A NaN or an infinity on any rank reaches every rank's average, and the ranks hold the same
    // bits, so each one decides alike to skip the update without a word to the others.
    if (!all_finite(state.grads().flat())) {
      ++skipped_steps_;
      spdlog::warn(
          "worker={}: skipped the update of step {}: the averaged gradient holds a NaN or an "
          "infinity ({} skipped so far); the parameters are unchanged",
          rank_, state.step, skipped_steps_);
      ++state.step;
      return loss;
    }
    // The update and the moving average in one pass, a cache-sized chunk at a time: the average
    // reads each chunk of new parameters while it is still in cache.
    const size_t values = state.params().flat().size();
    for (size_t begin = 0; begin < values; begin += kUpdateChunkFloats)
      state.apply(lr, state.step, begin, std::min(values, begin + kUpdateChunkFloats));
    ++state.step;
    return loss;
  }

  // Rank 0 evaluated (the replicas are identical, so its accuracy is everyone's, and so are the
  // best weights, which every rank keeps); every rank must leave the loop at the same step, since a
  // rank that left alone would leave the others waiting in their next all-reduce.
  StopVerdict agree_to_stop(StopVerdict verdict) override {
    std::array<float, 5> shared = {static_cast<float>(verdict.accuracy),
                                   static_cast<float>(verdict.loss), verdict.stop ? 1.0f : 0.0f,
                                   verdict.early ? 1.0f : 0.0f, verdict.improved ? 1.0f : 0.0f};
    communicator_->broadcast(shared);
    return {.stop = shared[2] != 0,
            .accuracy = shared[0],
            .loss = shared[1],
            .early = shared[3] != 0,
            .improved = shared[4] != 0};
  }

  // A 12-byte all-reduce a step (about 10 us on loopback): which of the signals reached any rank.
  int agree_to_halt(int own_signal) override {
    for (size_t i = 0; i < kHaltSignals.size(); ++i)
      halt_votes_[i] = own_signal == kHaltSignals[i] ? 1.0f : 0.0f;
    communicator_->allreduce(halt_votes_, ReduceOp::kSum);
    for (size_t i = 0; i < kHaltSignals.size(); ++i)
      if (halt_votes_[i] > 0) return kHaltSignals[i];
    return 0;
  }

  std::string counters() const override {
    return fmt::format("{} updates skipped for a non-finite gradient", skipped_steps_);
  }

  void print_summary(std::ostream& out, const RunFigures& f) const override {
    // Replicas that drifted apart by one bit show here: the tests compare it across workers.
    fmt::print(out, "worker={}: parameters crc32c = 0x{:08X}\n", rank_, params_crc_);
    if (!chief()) return;
    const int64_t steps = f.last_step - f.first_step;
    const double s = f.train_seconds;
    fmt::print(out, "aggregate: {} global steps in {:.3f} s, {:.1f} examples/sec over {} workers\n",
               steps, s, s > 0 ? steps * f.batch_size * size() / s : 0.0, size());
  }

  void finish(TrainingState& state, bool /*reached_end*/) override {
    params_crc_ = crc_of(std::span<const float>(state.params().flat()));
  }

 private:
  int size() const { return static_cast<int>(workers_.size()); }
  bool chief() const { return rank_ == 0; }
  // How many workers of the cluster share this task's host (all of them, under the launcher).
  int workers_on_host(const std::string& host) const {
    int here = 0;
    for (const TaskId& worker : workers_)
      here += config_.cluster.cluster.address(worker).host == host;
    return here;
  }
  // The ring names ranks "<prefix><rank>"; with no chief job that is the task's own name.
  std::string rank_prefix() const {
    return config_.cluster.cluster.has_job(kChiefJob) ? "rank" : std::string(kWorkerJob);
  }
  std::string name() const { return fmt::format("{}{}", rank_prefix(), rank_); }

  // Which way chunks travel on each link: the honest answer to "is this run using memory or TCP?"
  void print_links() {
    if (size() == 1) return;
    auto path = [&](Side side) {
      if (!ring_->reads_memory(side)) return "tcp";
      return ring_->shares_mailbox(side)
                 ? "shm (copied out of the sender's memory, announced through a shared mailbox)"
                 : "shm (copied out of the sender's memory, announced in frames)";
    };
    fmt::print(out_, "worker={}: transport to {} (left): {}; to {} (right): {}\n", rank_,
               ring_->rank_name((rank_ + size() - 1) % size()), path(Side::kLeft),
               ring_->rank_name((rank_ + 1) % size()), path(Side::kRight));
  }

  void print_start_line(const TrainingState& state) {
    const std::string role =
        config_.cluster.task.to_string() != fmt::format("{}:{}", kWorkerJob, rank_)
            ? fmt::format(" ({})", config_.cluster.task.to_string())
            : "";
    size_t largest_bucket = 0;
    for (const std::span<float> bucket : buckets_)
      largest_bucket = std::max(largest_bucket, bucket.size_bytes());
    fmt::print(out_,
               "{}{}: allreduce training of {} ({} parameters), batch {} on slice {} of {}, {} "
               "global steps, {} fusion bucket(s) of {:.1f} KiB at most, fingerprint {:016x}{}\n",
               name(), role, state.model().name(), state.params().num_values(), c_.batch_size,
               rank_, size(), total_steps_, buckets_.size(), largest_bucket / 1024.0,
               fnv1a(settings_), chief() ? " (chief)" : "");
    out_ << std::flush;
  }

  // Rank 0's parameters, optimizer slots, moving average and global step, on every rank.
  void share_state(TrainingState& state) {
    communicator_->broadcast(state.params().flat());
    for (ParamSet& slot : state.optimizer().slots()) communicator_->broadcast(slot.flat());
    if (MovingAverage* average = state.moving_average())
      communicator_->broadcast(average->shadow().flat());
    // The step rides as two floats below 2^24, each of which a float holds exactly.
    constexpr int64_t kLow = int64_t{1} << 24;
    std::array<float, 2> step_parts = {static_cast<float>(state.step / kLow),
                                       static_cast<float>(state.step % kLow)};
    communicator_->broadcast(step_parts);
    state.step = static_cast<int64_t>(step_parts[0]) * kLow + static_cast<int64_t>(step_parts[1]);
  }

  const TrainConfig& c_;
  const AllreduceClusterConfig& config_;
  std::ostream& out_;
  const int rank_;
  const std::vector<TaskId> workers_;      // in rank order
  std::vector<std::span<float>> buckets_;  // views of the state's gradient arena
  static constexpr std::array<int, 3> kHaltSignals = {SIGTERM, SIGHUP, SIGINT};
  std::array<float, kHaltSignals.size()> halt_votes_{};
  std::string settings_;  // what the fingerprint hashes
  int64_t total_steps_ = 0;
  std::optional<TcpRing> ring_;
  std::optional<Communicator> communicator_;  // after ring_: uses it
  int64_t skipped_steps_ = 0;                 // updates skipped for a non-finite averaged gradient
  uint32_t params_crc_ = 0;
};

}  // namespace

std::vector<ArenaSlice> fusion_buckets(const ParamSet& layout, size_t fusion_bytes) {
  const size_t arena = layout.flat().size();
  if (arena == 0) return {};
  if (fusion_bytes == 0) return {ArenaSlice{0, arena}};
  const size_t most = std::max<size_t>(1, fusion_bytes / sizeof(float));
  std::vector<ArenaSlice> buckets;
  size_t open = 0;  // where the bucket being filled starts
  for (size_t i = 0; i < layout.count(); ++i) {
    const size_t begin = layout.offset(i);
    const size_t end = i + 1 < layout.count() ? layout.offset(i + 1) : arena;
    if (end - open <= most) continue;  // tensor i fits in the open bucket
    if (begin > open) {
      buckets.push_back({open, begin - open});
      open = begin;
    }
    for (; end - open > most; open += most) buckets.push_back({open, most});
  }
  if (arena > open) buckets.push_back({open, arena - open});
  return buckets;
}

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
  AllreduceStrategy strategy(train, config, state, input, out);
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
