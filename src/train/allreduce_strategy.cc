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

// Keras clips the aggregated gradient: here the average, the same bits on every rank. The update
// and the moving average then go in one pass, a cache-sized chunk at a time: the average reads
// each chunk of new parameters while it is still in cache.
void clip_and_apply(TrainingState& state, float lr) {
  state.optimizer().clip(state.grads());
  const size_t values = state.params().flat().size();
  for (size_t begin = 0; begin < values; begin += kUpdateChunkFloats)
    state.apply(lr, state.step, begin, std::min(values, begin + kUpdateChunkFloats));
}

// "worker1: allreduce training of mlp (...), batch 100 on slice 1 of 2, ...": what this worker
// trains and agrees on with the others.
std::string start_line(const AllreduceRing& ring, const AllreduceClusterConfig& config,
                       const TrainConfig& c, const TrainingState& state, int64_t total_steps,
                       const GradientBuckets& buckets, uint64_t fingerprint) {
  const bool elastic = ring.elastic();
  const std::string role =
      !elastic && config.cluster.task.to_string() != fmt::format("{}:{}", kWorkerJob, ring.rank())
          ? fmt::format(" ({})", config.cluster.task.to_string())
          : "";
  // An elastic worker's slice and role come with the job's first view of it.
  const std::string slice = elastic ? fmt::format("elastic (the job's coordinator at {})",
                                                  config.coordinator->to_string())
                                    : fmt::format("on slice {} of {}", ring.rank(), ring.size());
  return fmt::format(
      "{}{}: allreduce training of {} ({} parameters), batch {} {}, {} global steps, {} fusion "
      "bucket(s) of {:.1f} KiB at most, fingerprint {:016x}{}",
      ring.name(), role, state.model().name(), state.params().num_values(), c.batch_size, slice,
      total_steps, buckets.count(), buckets.largest_bytes() / 1024.0, fingerprint,
      ring.chief() && !elastic ? " (chief)" : "");
}

// The chief's verdict, on every rank (throws CollectiveError).
StopVerdict broadcast_verdict(Communicator& communicator, const StopVerdict& verdict) {
  std::array<float, 5> shared = {static_cast<float>(verdict.accuracy),
                                 static_cast<float>(verdict.loss), verdict.stop ? 1.0f : 0.0f,
                                 verdict.early ? 1.0f : 0.0f, verdict.improved ? 1.0f : 0.0f};
  communicator.broadcast(shared);
  return {.stop = shared[2] != 0,
          .accuracy = shared[0],
          .loss = shared[1],
          .early = shared[3] != 0,
          .improved = shared[4] != 0};
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

namespace {

// What an elastic job's coordinator admits a worker on: what it trains, less the steps, which
// the job's --workers count.
nlohmann::json admission_settings(const TrainConfig& train, const AllreduceClusterConfig& config,
                                  const TrainingState& state, const TrainingInput& input) {
  if (!config.coordinator) return nullptr;
  nlohmann::json settings = agreed_settings(train, config, state.model(), state.params(), input, 0);
  settings["ring"].erase("total_steps");
  return settings;
}

}  // namespace

AllreduceStrategy::AllreduceStrategy(const TrainConfig& train, const AllreduceClusterConfig& config,
                                     TrainingState& state, const TrainingInput& input,
                                     std::unique_ptr<RingConnector> connector, std::ostream& out)
    : c_(train),
      config_(config),
      out_(out),
      ring_(train, config, std::move(connector), admission_settings(train, config, state, input),
            out),
      buckets_(state.grads(), config.fusion_bytes),
      batches_(train.batch_size, config.keep_global_batch, ring_.planned_workers(),
               input.train_examples()),
      state_(state) {
  if (config.keep_global_batch && !config.coordinator) {
    throw UsageError(
        "--elastic_batch global: what an elastic job keeps at a change; give --min_workers (or "
        "--join a job's coordinator)");
  }
  // A global step takes one batch from every worker: an epoch is a shard's batches of them.
  total_steps_ = total_global_steps(
      train, input.train_examples() / (int64_t{train.batch_size} * ring_.planned_workers()));
  fingerprint_ = fnv1a(
      agreed_settings(train, config, state.model(), state.params(), input, total_steps_).dump());
  ring_.agree_on(fingerprint_);
}

const AllreduceClusterConfig& default_allreduce_cluster_config() {
  static const AllreduceClusterConfig defaults;
  return defaults;
}

AllreduceStrategy::~AllreduceStrategy() = default;

void AllreduceStrategy::abort(std::string_view why) {
  const std::string reason = fmt::format("{} stopped: {}", name(), why);
  // The coordinator hears it leave, and why, rather than find its connection closed.
  if (elastic() && !leaving_) ring_.leave(state_.step, std::string(why), false);
  ring_.abort(reason);
}

WorkerPlace AllreduceStrategy::place() const {
  // Before its first view, a worker that joins a running job alone is nobody's chief.
  const bool joining = ring_.before_first_view() && !config_.member_name.empty();
  return {.rank = ring_.rank(),
          .workers = size(),
          .chief = chief() && !joining,
          .distributed = true,
          .id = elastic() ? ring_.member_index() : -1};
}

int64_t AllreduceStrategy::start(TrainingState& state, const Restore& restore) {
  fmt::print(out_, "{}\n",
             start_line(ring_, config_, c_, state, total_steps_, buckets_, fingerprint_));
  out_ << std::flush;
  if (elastic()) {
    restore_ = restore;
    join_view(state, /*have_state=*/false);
    place_changed_ = false;  // the loop takes its place after start() in any case
    vote_.collective_ended();
    return state.step;
  }
  ring_.connect();
  ring_.print_links(place().name_index());
  if (chief()) {
    state.initialize(c_.seed);
    if (const auto step = restore()) state.step = *step;
  }
  broadcast_state(ring_.communicator(), state, 0, nullptr);
  vote_.collective_ended();
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
                           static_cast<float>(batches_.size(size()));
      weight != 1.0f) {
    for (float& g : state.grads().flat()) g *= weight;
  }
  const auto computed = Clock::now();
  // What this worker did alone since the last collective ended: its data, its delay, its
  // gradients (the first step counts from the end of start()).
  vote_.own_part_ended();
  StepReport report;
  try {
    // A view of one member has no ring for the coordinator's change to interrupt: it looks at
    // every step, so that no member trains on in a view the job has replaced.
    if (ring_.interrupted()) throw CollectiveError(ring_.interrupt_why());
    buckets_.average(ring_.communicator());
  } catch (const CollectiveError& error) {
    if (!elastic()) throw;
    reform(state, error.what());  // the step is dropped here, or comes as the furthest applied it
    // Every member is now at the top of a step, as a joiner is: no halt vote before the next.
    skip_vote_ = true;
    return report;
  }
  const auto communicated = Clock::now();
  vote_.collective_ended();
  report.communicate = std::chrono::duration<double>(communicated - computed).count();
  if (elastic()) batches_.advance(size());
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
  clip_and_apply(state, context.lr);
  ++state.step;
  report.apply = std::chrono::duration<double>(Clock::now() - communicated).count();
  return report;
}

// Rank 0 evaluated (the replicas are identical, so its accuracy is everyone's, and so are the
// best weights, which every rank keeps); every rank must leave the loop at the same step, since a
// rank that left alone would leave the others waiting in their next all-reduce.
StopVerdict AllreduceStrategy::agree_to_stop(StopVerdict verdict) {
  try {
    verdict = broadcast_verdict(ring_.communicator(), verdict);
  } catch (const CollectiveError& error) {
    if (!elastic()) throw;
    // A joiner is at the top of a step, where every member now goes on without a verdict.
    reform(state_, error.what());
    return {.accuracy = verdict.accuracy, .loss = verdict.loss};
  }
  vote_.collective_ended();  // the chief's evaluation is nobody's own time
  return verdict;
}

StepBoundary AllreduceStrategy::after_step(int own_signal) {
  StepBoundary boundary{.halt_signal = agree_to_halt(own_signal)};
  boundary.left_job = leaving_;
  boundary.place_changed = std::exchange(place_changed_, false);
  boundary.worker_counts = ring_.membership().take_at_boundary();
  return boundary;
}

// In an elastic job a SIGTERM is one worker's leave (a pod scaled away), unless every worker got
// one; SIGINT and SIGHUP stop the whole job as before.
int AllreduceStrategy::agree_to_halt(int own_signal) {
  if (skip_vote_) {
    skip_vote_ = false;
    return 0;  // a signal stays requested, and counts at the next vote
  }
  std::array<float, RingStepVote::kSignals.size()> counts{};
  try {
    counts = vote_.vote(own_signal);
  } catch (const CollectiveError& error) {
    if (!elastic()) throw;
    // Another member may have counted this worker's SIGTERM and gone on to re-form without it,
    // interrupting this vote: it leaves all the same.
    if (own_signal == SIGTERM) return leave(SIGTERM);
    reform(state_, error.what());
    return 0;
  }
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] == 0) continue;
    const int signal = RingStepVote::kSignals[i];
    const bool some_leave = elastic() && signal == SIGTERM && counts[i] < size();
    if (!some_leave) return signal;
    if (own_signal == SIGTERM) return leave(SIGTERM);
    reform(state_, "a worker leaves");
    return 0;
  }
  return 0;
}

int AllreduceStrategy::leave(int signal) {
  leaving_ = true;
  ring_.leave(state_.step, signal_name(signal), /*finished=*/false);
  return signal;
}

LogExtras AllreduceStrategy::log_extras() {
  LogExtras extras;
  if (elastic()) extras.scalars.emplace_back("workers", static_cast<double>(size()));
  if (std::string summary = vote_.take_summary(); !summary.empty())
    extras.lines.push_back(std::move(summary));
  return extras;
}

Closing AllreduceStrategy::closing(const RunFigures& f) const {
  Closing closing{.counters =
                      fmt::format("{} updates skipped for a non-finite gradient", skipped_steps_)};
  if (elastic()) {
    closing.counters +=
        fmt::format("; {} membership view(s): {}", ring_.views(), ring_.membership().counts());
  }
  // Replicas that drifted apart by one bit show here: the tests compare it across workers.
  closing.lines.push_back(
      fmt::format("worker={}: parameters crc32c = 0x{:08X}", place().name_index(), params_crc_));
  if (!chief()) return closing;
  const int64_t steps = f.last_step - f.first_step;
  const double s = f.train_seconds;
  closing.lines.push_back(fmt::format(
      "aggregate: {} global steps in {:.3f} s, {:.1f} examples/sec over {} workers", steps, s,
      s > 0 ? static_cast<double>(steps * batches_.size(size())) / s : 0.0, size()));
  return closing;
}

void AllreduceStrategy::finish(TrainingState& state, bool reached_end) {
  params_crc_ = crc_of(std::span<const float>(state.params().flat()));
  if (elastic() && reached_end) ring_.leave(state.step, "finished", /*finished=*/true);
}

}  // namespace dtrain
