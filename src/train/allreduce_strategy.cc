// AllreduceStrategy: listening, joining the ring, the step's all-reduces and the agreements that
// keep the replicas in step (state, stop, halt). What every worker must agree on is hashed into
// the ring's fingerprint.
#include "train/allreduce_strategy.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <utility>

#include "base/crc32c.h"
#include "base/log.h"
#include "cluster/bind_address.h"
#include "nn/model_zoo.h"
#include "tensor/ops.h"
#include "train/fusion_buckets.h"
#include "train/nonfinite_guard.h"
#include "train/training_loop.h"

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

}  // namespace

nlohmann::json agreed_settings(const TrainConfig& c, const AllreduceClusterConfig& config,
                               const Model& model, const ParamSet& layout,
                               const TrainingInput& input, int64_t total_steps) {
  nlohmann::json agreed = train_config_json(c);
  agreed.erase("towers");
  // How many workers a step averages is the ring's own business, and an elastic job changes it;
  // a joiner started by hand does not know it. Resuming checks it (train/resume_check.h).
  agreed.erase("global_batch");
  if (agreed.contains("data")) {
    for (const char* path : {"data_dir", "train_data", "test_data"}) agreed["data"].erase(path);
  }
  nlohmann::json shapes = nlohmann::json::object();
  for (const ParamSpec& spec : layout.specs()) shapes[spec.name] = spec.shape;
  const OptimizerConfig& o = c.optimizer;
  agreed["ring"] = {
      {"layout", shapes},
      {"l2", model.l2()},
      {"optimizer",
       {{"name", o.name},
        {"momentum", optimizer_defaults(o).momentum},
        {"nesterov", o.use_nesterov},
        {"beta1", o.beta1},
        {"beta2", o.beta2},
        {"epsilon", optimizer_defaults(o).epsilon},
        {"rho", o.rho},
        {"centered", o.centered},
        {"initial_accumulator_value", o.initial_accumulator_value},
        {"weight_decay", optimizer_defaults(o).weight_decay},
        {"clipnorm", o.clipnorm},
        {"global_clipnorm", o.global_clipnorm},
        {"clipvalue", o.clipvalue}}},
      {"lr_staircase", c.lr_staircase},
      {"total_steps", total_steps},
      {"eval_every", c.eval_every},
      {"target_accuracy", c.target_accuracy ? nlohmann::json(*c.target_accuracy) : nullptr},
      {"early_stopping_patience", c.early_stopping_patience},
      {"fusion_bytes", config.fusion_bytes},
      {"elastic_batch", config.keep_global_batch ? "global" : "worker"},
      {"chunk_bytes", config.chunk_bytes},
      // The examples themselves, not the files' names (streamed files: their names and sizes).
      {"train_examples", input.train_examples()},
      {"train_data_crc", input.fingerprint()},
      {"shuffle_buffer", c.shuffle_buffer}};
  return agreed;
}

AllreduceStrategy::AllreduceStrategy(const TrainConfig& train, const AllreduceClusterConfig& config,
                                     TrainingState& state, const TrainingInput& input,
                                     std::unique_ptr<RingConnector> connector, std::ostream& out)
    : c_(train),
      config_(config),
      out_(out),
      rank_(worker_rank(config.cluster.cluster, config.cluster.task)),
      workers_(training_workers(config.cluster.cluster)),
      connector_(std::move(connector)),
      state_(state),
      train_examples_(input.train_examples()) {
  for (const ArenaSlice& slice : fusion_buckets(state.grads(), config.fusion_bytes))
    buckets_.push_back(state.grads().flat().subspan(slice.begin, slice.size));
  planned_workers_ = size();
  if (config.keep_global_batch && !config.coordinator) {
    throw UsageError(
        "--elastic_batch global: what an elastic job keeps at a change; give --min_workers (or "
        "--join a job's coordinator)");
  }
  if (config.coordinator) {
    // The job's coordinator admits this worker on what it trains, and says how many workers the
    // job's steps are counted by (its --workers: a worker that joins later was started alone).
    nlohmann::json settings =
        agreed_settings(train, config, state.model(), state.params(), input, 0);
    settings["ring"].erase("total_steps");
    membership_options_ =
        MembershipClientOptions{.coordinator = *config.coordinator,
                                .secret = config.secret,
                                .authenticate_frames = config.cluster.authenticate_frames,
                                .tcp_congestion = config.cluster.tcp_congestion,
                                .name = name(),
                                .settings = std::move(settings),
                                .timeout_ms = config.collective_timeout_ms};
    membership_ = std::make_unique<MembershipClient>(membership_options_);
    planned_workers_ = membership_->planned_workers();
  }
  // A global step takes one batch from every worker: an epoch is a shard's batches of them.
  total_steps_ = total_global_steps(
      train, input.train_examples() / (int64_t{train.batch_size} * planned_workers_));
  fingerprint_ = fnv1a(
      agreed_settings(train, config, state.model(), state.params(), input, total_steps_).dump());
  if (elastic()) return;
  listen_on_cluster_ring();
}

const AllreduceClusterConfig& default_allreduce_cluster_config() {
  static const AllreduceClusterConfig defaults;
  return defaults;
}

void AllreduceStrategy::listen_on_cluster_ring() {
  const ClusterSpec& cluster = config_.cluster.cluster;
  const HostPort& own = cluster.address(config_.cluster.task);
  if (connector_->has_address()) {
    const BindAddress bind = bind_address_for(own, config_.cluster.bind_host);
    fmt::print(out_, "worker={}: listening on {}:{} ({})\n", rank_, bind.host, own.port, bind.why);
  }
  const TaskId& right = workers_[static_cast<size_t>((rank_ + 1) % size())];
  connector_->listen(ring_options(size(), rank_, cluster.address(right)));
}

RingOptions AllreduceStrategy::ring_options(int size, int rank, const HostPort& right) const {
  const HostPort& own = config_.cluster.cluster.address(config_.cluster.task);
  RingOptions options{.size = size,
                      .rank = rank,
                      .bind_host = bind_address_for(own, config_.cluster.bind_host).host,
                      .port = own.port,
                      .right = right,
                      .secret = config_.secret,
                      .authenticate_frames = config_.cluster.authenticate_frames,
                      .tcp_congestion = config_.cluster.tcp_congestion,
                      .fingerprint = fingerprint_,
                      .timeout_ms = config_.collective_timeout_ms,
                      .spin_us = ring_spin_us(workers_on_host(own.host), config_.transport),
                      .job = rank_prefix(),
                      .transport = config_.transport,
                      .stop = c_.stop,
                      .wait_report =
                          [this](const std::string& line) {
                            fmt::print(out_, "{}: {}\n", name(), line);
                            out_ << std::flush;
                          },
                      .stall_warning_ms = config_.stall_warning_ms,
                      .chief = chief(),
                      .interrupt = elastic() ? &membership_->interrupt() : nullptr,
                      .view = view_.id,
                      .names = elastic() ? view_.names() : std::vector<std::string>()};
  return options;
}

AllreduceStrategy::~AllreduceStrategy() = default;

void AllreduceStrategy::abort(std::string_view why) {
  const std::string reason = fmt::format("{} stopped: {}", name(), why);
  // The coordinator hears it leave, and why, rather than find its connection closed.
  if (elastic() && !leaving_) membership_->leave(state_.step, std::string(why), false);
  if (ring_) {
    ring_->abort(reason);
  } else if (connector_) {
    connector_->abort(reason);
  }
}

WorkerPlace AllreduceStrategy::place() const {
  // Before its first view, a worker that joins a running job alone is nobody's chief.
  const bool joining = elastic() && view_.id == 0 && !config_.member_name.empty();
  return {.rank = rank_,
          .workers = size(),
          .chief = chief() && !joining,
          .distributed = true,
          .id = elastic() ? member_index() : -1};
}

std::string AllreduceStrategy::describe() const {
  if (elastic()) {
    return fmt::format("allreduce, {} workers (elastic: the job's coordinator at {})", size(),
                       config_.coordinator->to_string());
  }
  return fmt::format("allreduce, {} workers", size());
}

int64_t AllreduceStrategy::start(TrainingState& state, const Restore& restore) {
  print_start_line(state);
  if (elastic()) {
    restore_ = restore;
    join_view(state, /*have_state=*/false);
    place_changed_ = false;  // the loop takes its place after start() in any case
    own_since_ = std::chrono::steady_clock::now();
    return state.step;
  }
  ring_ = connector_->connect();
  connector_.reset();
  communicator_ = std::make_unique<Communicator>(
      *ring_, CollectiveOptions{.max_chunk_bytes = config_.chunk_bytes});
  print_links();
  if (chief()) {
    state.initialize(c_.seed);
    if (const auto step = restore()) state.step = *step;
  }
  share_state(state);
  own_since_ = std::chrono::steady_clock::now();
  return state.step;
}

// The steady state: no allocation; the buckets are views of the gradient arena, all-reduced in
// place, and the all-reduce leaves the same bits on every rank, so every rank's optimizer makes
// the same update.
StepReport AllreduceStrategy::exchange_and_apply(TrainingState& state, const StepContext& context) {
  using Clock = std::chrono::steady_clock;
  // Slices of a kept global batch differ by one example: each mean gradient weighs by its
  // slice's share, so the average over the workers is the mean over the whole global batch.
  if (const float weight = static_cast<float>(context.examples) * static_cast<float>(size()) /
                           static_cast<float>(global_batch());
      weight != 1.0f) {
    for (float& g : state.grads().flat()) g *= weight;
  }
  const auto computed = Clock::now();
  // What this worker did alone since the last collective ended: its data, its delay, its
  // gradients (the first step counts from the end of start()).
  own_seconds_ = std::chrono::duration<float>(computed - own_since_).count();
  StepReport report;
  try {
    // A view of one member has no ring for the coordinator's change to interrupt: it looks at
    // every step, so that no member trains on in a view the job has replaced.
    if (elastic() && membership_->interrupt().raised() > view_.id)
      throw CollectiveError(membership_->interrupt().why());
    auto bucket_began = computed;
    for (size_t i = 0; i < buckets_.size(); ++i) {
      communicator_->allreduce(buckets_[i], ReduceOp::kAverage, static_cast<int>(i));
      if (bucket_seconds_) {
        const auto now = Clock::now();
        bucket_seconds_(static_cast<int>(i), buckets_[i].size_bytes(),
                        std::chrono::duration<double>(now - bucket_began).count());
        bucket_began = now;
      }
    }
  } catch (const CollectiveError& error) {
    if (!elastic()) throw;
    reform(state, error.what());  // the step is dropped here, or comes as the furthest applied it
    // Every member is now at the top of a step, as a joiner is: no halt vote before the next.
    skip_vote_ = true;
    return report;
  }
  const auto communicated = Clock::now();
  own_since_ = communicated;
  report.communicate = std::chrono::duration<double>(communicated - computed).count();
  if (elastic()) position_ = after_batch(position_, global_batch(), train_examples_);
  // A NaN or an infinity on any rank reaches every rank's average, and the ranks hold the same
  // bits, so each one decides alike to skip the update without a word to the others.
  if (!context.guard->admits(state.grads().flat(), [&] {
        return NonFiniteGuard::Refusal{
            .action = fmt::format("skipped the update of step {}", state.step),
            .subject = "the averaged gradient",
            .consequence = "the parameters are unchanged"};
      })) {
    ++skipped_steps_;
    ++state.step;
    return report;
  }
  // Keras clips the aggregated gradient: here the average, the same bits on every rank.
  state.optimizer().clip(state.grads());
  // The update and the moving average in one pass, a cache-sized chunk at a time: the average
  // reads each chunk of new parameters while it is still in cache.
  const size_t values = state.params().flat().size();
  for (size_t begin = 0; begin < values; begin += kUpdateChunkFloats)
    state.apply(context.lr, state.step, begin, std::min(values, begin + kUpdateChunkFloats));
  ++state.step;
  report.apply = std::chrono::duration<double>(Clock::now() - communicated).count();
  return report;
}

// Rank 0 evaluated (the replicas are identical, so its accuracy is everyone's, and so are the
// best weights, which every rank keeps); every rank must leave the loop at the same step, since a
// rank that left alone would leave the others waiting in their next all-reduce.
StopVerdict AllreduceStrategy::agree_to_stop(StopVerdict verdict) {
  std::array<float, 5> shared = {static_cast<float>(verdict.accuracy),
                                 static_cast<float>(verdict.loss), verdict.stop ? 1.0f : 0.0f,
                                 verdict.early ? 1.0f : 0.0f, verdict.improved ? 1.0f : 0.0f};
  try {
    communicator_->broadcast(shared);
  } catch (const CollectiveError& error) {
    if (!elastic()) throw;
    // A joiner is at the top of a step, where every member now goes on without a verdict.
    reform(state_, error.what());
    return {.accuracy = verdict.accuracy, .loss = verdict.loss};
  }
  own_since_ = std::chrono::steady_clock::now();  // the chief's evaluation is nobody's own time
  return {.stop = shared[2] != 0,
          .accuracy = shared[0],
          .loss = shared[1],
          .early = shared[3] != 0,
          .improved = shared[4] != 0};
}

StepBoundary AllreduceStrategy::after_step(int own_signal) {
  StepBoundary boundary{.halt_signal = agree_to_halt(own_signal)};
  boundary.left_job = leaving_;
  boundary.place_changed = std::exchange(place_changed_, false);
  boundary.worker_counts = std::exchange(worker_counts_, {});
  return boundary;
}

// In an elastic job a SIGTERM is one worker's leave (a pod scaled away), unless every worker got
// one; SIGINT and SIGHUP stop the whole job as before.
int AllreduceStrategy::agree_to_halt(int own_signal) {
  if (skip_vote_) {
    skip_vote_ = false;
    return 0;  // a signal stays requested, and counts at the next vote
  }
  try {
    halt_vote(own_signal);
  } catch (const CollectiveError& error) {
    if (!elastic()) throw;
    // Another member may have counted this worker's SIGTERM and gone on to re-form without it,
    // interrupting this vote: it leaves all the same.
    if (own_signal == SIGTERM) return leave(SIGTERM);
    reform(state_, error.what());
    return 0;
  }
  for (size_t i = 0; i < kHaltSignals.size(); ++i) {
    if (halt_votes_[i] == 0) continue;
    const bool some_leave = elastic() && kHaltSignals[i] == SIGTERM && halt_votes_[i] < size();
    if (!some_leave) return kHaltSignals[i];
    if (own_signal == SIGTERM) return leave(SIGTERM);
    reform(state_, "a worker leaves");
    return 0;
  }
  return 0;
}

int AllreduceStrategy::leave(int signal) {
  leaving_ = true;
  membership_->leave(state_.step, signal_name(signal), /*finished=*/false);
  return signal;
}

void AllreduceStrategy::halt_vote(int own_signal) {
  halt_votes_.assign(kHaltSignals.size() + static_cast<size_t>(size()), 0.0f);
  for (size_t i = 0; i < kHaltSignals.size(); ++i)
    halt_votes_[i] = own_signal == kHaltSignals[i] ? 1.0f : 0.0f;
  halt_votes_[kHaltSignals.size() + static_cast<size_t>(rank_)] = own_seconds_;
  communicator_->allreduce(halt_votes_, ReduceOp::kSum);
  own_since_ = std::chrono::steady_clock::now();
  if (!chief()) return;
  const auto name = [this](int rank) { return name_of(rank); };
  const std::span<const float> own = std::span(halt_votes_).subspan(kHaltSignals.size());
  for (const std::string& line : stragglers_.observe(own, name)) {
    fmt::print(out_, "{}: {}\n", this->name(), line);
    out_ << std::flush;
  }
  if (worker_times_) worker_times_(stragglers_.times(own, name));
}

LogExtras AllreduceStrategy::log_extras() {
  LogExtras extras;
  if (elastic()) extras.scalars.emplace_back("workers", static_cast<double>(size()));
  if (!chief() || size() < 2) return extras;
  std::string summary = stragglers_.take_summary([this](int rank) { return name_of(rank); });
  if (!summary.empty()) extras.lines.push_back(std::move(summary));
  return extras;
}

Closing AllreduceStrategy::closing(const RunFigures& f) const {
  Closing closing{.counters =
                      fmt::format("{} updates skipped for a non-finite gradient", skipped_steps_)};
  if (elastic()) {
    closing.counters += fmt::format("; {} membership view(s): {} worker(s) left, {} joined", views_,
                                    left_, joined_);
  }
  // Replicas that drifted apart by one bit show here: the tests compare it across workers.
  closing.lines.push_back(
      fmt::format("worker={}: parameters crc32c = 0x{:08X}", place().name_index(), params_crc_));
  if (!chief()) return closing;
  const int64_t steps = f.last_step - f.first_step;
  const double s = f.train_seconds;
  closing.lines.push_back(
      fmt::format("aggregate: {} global steps in {:.3f} s, {:.1f} examples/sec over {} workers",
                  steps, s, s > 0 ? static_cast<double>(steps * global_batch()) / s : 0.0, size()));
  return closing;
}

void AllreduceStrategy::finish(TrainingState& state, bool reached_end) {
  params_crc_ = crc_of(std::span<const float>(state.params().flat()));
  if (elastic() && reached_end) membership_->leave(state.step, "finished", /*finished=*/true);
}

// How many workers of the cluster share this task's host (all of them, under the launcher).
int AllreduceStrategy::workers_on_host(const std::string& host) const {
  int here = 0;
  for (const TaskId& worker : workers_)
    here += config_.cluster.cluster.address(worker).host == host;
  return here;
}

// The ring names ranks "<prefix><rank>"; with no chief job that is the task's own name.
std::string AllreduceStrategy::rank_prefix() const {
  return config_.cluster.cluster.has_job(kChiefJob) ? "rank" : std::string(kWorkerJob);
}

// An elastic job's worker keeps its task's name whatever its rank.
std::string AllreduceStrategy::name() const {
  if (!config_.member_name.empty()) return config_.member_name;
  if (config_.coordinator) {
    return fmt::format("{}{}", config_.cluster.task.job, config_.cluster.task.index);
  }
  return name_of(rank_);
}

std::string AllreduceStrategy::name_of(int rank) const {
  if (elastic() && rank >= 0 && rank < view_.size())
    return view_.members[static_cast<size_t>(rank)].name;
  return fmt::format("{}{}", rank_prefix(), rank);
}

// Which way chunks travel on each link: the honest answer to "is this run using memory or TCP?"
void AllreduceStrategy::print_links() {
  if (size() == 1) return;
  fmt::print(out_, "worker={}: transport to {} (left): {}; to {} (right): {}\n",
             place().name_index(), name_of((rank_ + size() - 1) % size()),
             ring_->describe_link(Side::kLeft), name_of((rank_ + 1) % size()),
             ring_->describe_link(Side::kRight));
}

void AllreduceStrategy::print_start_line(const TrainingState& state) {
  const std::string role =
      !elastic() && config_.cluster.task.to_string() != fmt::format("{}:{}", kWorkerJob, rank_)
          ? fmt::format(" ({})", config_.cluster.task.to_string())
          : "";
  // An elastic worker's slice and role come with the job's first view of it.
  const std::string slice = elastic() ? fmt::format("elastic (the job's coordinator at {})",
                                                    config_.coordinator->to_string())
                                      : fmt::format("on slice {} of {}", rank_, size());
  size_t largest_bucket = 0;
  for (const std::span<float> bucket : buckets_)
    largest_bucket = std::max(largest_bucket, bucket.size_bytes());
  fmt::print(out_,
             "{}{}: allreduce training of {} ({} parameters), batch {} {}, {} global steps, {} "
             "fusion bucket(s) of {:.1f} KiB at most, fingerprint {:016x}{}\n",
             name(), role, state.model().name(), state.params().num_values(), c_.batch_size, slice,
             total_steps_, buckets_.size(), largest_bucket / 1024.0, fingerprint_,
             chief() && !elastic() ? " (chief)" : "");
  out_ << std::flush;
}

// Rank 0's parameters, optimizer slots, moving average and global step, on every rank.
// (An elastic job's position in the data too.)
void AllreduceStrategy::share_state(TrainingState& state, int root) {
  communicator_->broadcast(state.params().flat(), root);
  for (ParamSet& slot : state.optimizer().slots()) communicator_->broadcast(slot.flat(), root);
  if (MovingAverage* average = state.moving_average())
    communicator_->broadcast(average->shadow().flat(), root);
  communicator_->broadcast_bytes(std::as_writable_bytes(std::span(&state.step, 1)), root);
  if (elastic()) {
    int64_t position[2] = {position_.epoch, position_.taken};
    communicator_->broadcast_bytes(std::as_writable_bytes(std::span(position)), root);
    position_ = {position[0], position[1]};
  }
}

}  // namespace dtrain
