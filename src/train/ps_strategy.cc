// The ps strategies' worker: compute, then one push-pull per step.
#include "train/ps_strategy.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <chrono>
#include <csignal>

#include "base/crc32c.h"
#include "base/error.h"
#include "base/log.h"
#include "metrics/run_board.h"
#include "tensor/ops.h"
#include "train/nonfinite_guard.h"
#include "train/ps_worker_setup.h"

namespace dtrain {

PsStrategy::PsStrategy(const TrainConfig& train, const PsClusterConfig& config,
                       const TrainingState& state, std::ostream& out)
    : c_(train),
      config_(config),
      out_(out),
      sync_(resolve_sync(config)),
      rank_(config.joined_as >= 0 ? config.joined_as
                                  : worker_rank(config.cluster.cluster, config.cluster.task)),
      workers_(config.joined_as >= 0
                   ? config.job_workers
                   : static_cast<int>(training_workers(config.cluster.cluster).size())),
      chief_(config.joined_as < 0 && is_chief(config.cluster.cluster, config.cluster.task)),
      map_(partition_for(state.params(), config)) {}

std::string PsStrategy::describe() const {
  return fmt::format("{} ps, {} ps task(s), {} workers{}", sync_.sync_replicas ? "sync" : "async",
                     config_.cluster.cluster.num_tasks(kPsJob), workers_,
                     sync_.sync_replicas
                         ? fmt::format(", {} gradients per step", sync_.replicas_to_aggregate)
                         : "");
}

StrategyTraits PsStrategy::traits(int batch_size) const {
  return {.description = describe(),
          .steps_per_batch = sync_.sync_replicas ? 1 : workers_,
          .largest_batch = batch_size};
}

int64_t PsStrategy::start(TrainingState& state, const Restore& restore) {
  print_start_line(state);
  const PsClientOptions options =
      ps_client_options(c_, config_, state, rank_, chief_, name(), out_);
  client_.emplace(state.params(), map_, options);
  fmt::print(out_, "{}: connected to {} ps task(s) as worker {}\n", name(), options.ps.size(),
             rank_);
  fmt::print(out_, "worker={}: transport to {}\n", rank_,
             payload_paths(*client_, options.ps.size()));
  out_ << std::flush;
  bool restored = false;
  if (chief_) {
    restored = initialize_or_restore(state, restore);
  } else {
    wait_for_chief(*client_, c_, config_, name(), out_);
  }
  client_->pull(state.params());
  // A restored chief keeps the checkpoint's moving average; otherwise it starts from the values
  // every worker has just pulled.
  if (!restored && state.moving_average() != nullptr) state.moving_average()->reset(state.params());
  state.step = client_->global_step();
  return state.step;
}

StepReport PsStrategy::exchange_and_apply(TrainingState& state, const StepContext& context) {
  using Clock = std::chrono::steady_clock;
  const auto computed = Clock::now();
  push_pull_if_finite(state, context);
  // The ps tasks apply the update: a worker's step is its gradients and their exchange.
  const StepReport report{.communicate =
                              std::chrono::duration<double>(Clock::now() - computed).count()};
  state.step = client_->global_step();
  print_worker_changes();
  if (MovingAverage* average = state.moving_average()) average->update(state.params(), state.step);
  return report;
}

void PsStrategy::report_failure(const std::string& why) {
  if (client_) client_->report_failure(why);
}

void PsStrategy::before_checkpoint(TrainingState& state) {
  client_->pull_state(state.params(), state.optimizer().slots());
}

StepBoundary PsStrategy::after_step(int own_signal) {
  // In an elastic sync job, or an async one that counts its workers, a SIGTERM of this worker
  // alone is its leave (a pod scaled away): the ps tasks go on with the others.
  if (own_signal == SIGTERM && counts_workers() && !client_->halting()) leaving_ = true;
  return {.halt_signal = own_signal != 0      ? own_signal
                         : client_->halting() ? SIGTERM
                                              : 0,
          .left_job = leaving_,
          .worker_counts = membership_.take_at_boundary()};
}

void PsStrategy::finish(TrainingState& state, bool reached_end) {
  if (chief_) {
    client_->pull_state(state.params(), state.optimizer().slots());
  } else {
    client_->pull(state.params());
  }
  params_crc_ = crc32c(std::as_bytes(std::span<const float>(state.params().flat())));
  done_ = client_->worker_done(reached_end);
}

void PsStrategy::print_worker_changes() {
  if (client_->worker_changes() == workers_seen_.changes) return;
  const WorkerCount now = client_->counters().workers;
  if (now.changes == workers_seen_.changes) return;
  // Changes that came between two replies show as their newest, with how many there were.
  // A worker that joined late hears of earlier changes too: its own join is the one it tells.
  const uint32_t missed = workers_seen_.changes == 0 ? 0 : now.changes - workers_seen_.changes - 1;
  fmt::print(out_, "{}: worker{} {} at step {}: {} workers now{}\n", name(), now.worker,
             now.joined ? "joined" : "left", now.step, now.workers,
             missed > 0 ? fmt::format(" (the newest of {} changes)", missed + 1) : "");
  out_ << std::flush;
  workers_seen_ = now;
  // ps0's count is the job's membership: every change it counted, whoever joined or left.
  membership_.settle({.version = now.changes,
                      .workers = now.workers,
                      .left = now.left,
                      .joined = now.changes - now.left});
  membership_.took_effect(now.step);
}

// Every worker's mean own step time since the chief's last line, as ps0 saw it (ps/worker_pace.h).
LogExtras PsStrategy::log_extras() {
  if (!chief_) return {};
  const ps_protocol::DoneReply c = client_->counters();
  LogExtras extras{.scalars = {{"ps/stale_gradients", static_cast<double>(c.stale_dropped)},
                               {"ps/duplicate_pushes", static_cast<double>(c.duplicates)},
                               {"ps/non_finite_gradients", static_cast<double>(c.rejected)}}};
  if (counts_workers())
    extras.scalars.emplace_back("workers", c.workers.workers > 0 ? c.workers.workers : workers_);
  std::vector<WorkerPace::Totals> paces;
  for (const ps_protocol::DoneReply::WorkerSteps& pace : c.worker_steps)
    paces.push_back({.seconds = pace.seconds, .steps = pace.steps});
  const std::string line = mean_step_times_ms(paces, paces_seen_);
  if (worker_times_) {
    WorkerTimes times;  // a worker that has not pushed since: -1, a member with no step to tell
    for (size_t w = 0; w < paces.size(); ++w) {
      // Counted afresh where ps0 restarted and its totals went back, as the line counts them.
      const bool since_seen = w < paces_seen_.size() && paces_seen_[w].steps <= paces[w].steps;
      const uint32_t steps = paces[w].steps - (since_seen ? paces_seen_[w].steps : 0);
      const double seconds = paces[w].seconds - (since_seen ? paces_seen_[w].seconds : 0);
      times.workers.push_back({.name = fmt::format("worker{}", w),
                               .step_seconds = steps == 0 ? -1 : std::max(0.0, seconds / steps),
                               .steps = paces[w].steps});
    }
    worker_times_(times);
  }
  paces_seen_ = std::move(paces);
  if (!line.empty())
    extras.lines.push_back("own step time at ps0 (ms, mean since the last line):" + line);
  return extras;
}

Closing PsStrategy::closing(const RunFigures& f) const {
  Closing closing{.counters =
                      fmt::format("{} rounds with a stale gradient, {} with a non-finite one",
                                  stale_rounds_, nonfinite_rounds_)};
  if (counts_workers()) {
    closing.counters += "; " + membership_.counts();
  }
  // The values this worker last pulled, to the bit: what tests compare across runs and
  // transports.
  closing.lines.push_back(
      fmt::format("worker={}: parameters crc32c = 0x{:08X}", rank_, params_crc_));
  if (!chief_) return closing;
  const int64_t per_step = sync_.sync_replicas ? sync_.replicas_to_aggregate : 1;
  const int64_t steps = done_.step - f.first_step;
  const double s = f.train_seconds;
  closing.lines.push_back(fmt::format(
      "aggregate: {} global steps in {:.3f} s, {:.1f} examples/sec over {} workers; ps tasks "
      "dropped {} stale gradients and {} duplicate pushes, and rejected {} non-finite gradients",
      steps, s, s > 0 ? steps * per_step * f.batch_size / s : 0.0, workers_, done_.stale_dropped,
      done_.duplicates, done_.rejected));
  return closing;
}

std::string PsStrategy::name() const { return fmt::format("worker{}", rank_); }

void PsStrategy::print_start_line(const TrainingState& state) {
  fmt::print(out_, "{}: {} training of {} ({} parameters), batch {} on slice {} of {}{}\n", name(),
             sync_.sync_replicas ? "sync" : "async", state.model().name(),
             state.params().num_values(), c_.batch_size, place().rank, workers_,
             chief_ ? " (chief)" : "");
  out_ << std::flush;
}

bool PsStrategy::initialize_or_restore(TrainingState& state, const Restore& restore) {
  if (client_->initialized_at_hello()) {
    // A restarted chief: the ps tasks hold newer values than any checkpoint.
    fmt::print(out_, "{}: the ps tasks already hold the variables; not re-initialising\n", name());
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

void PsStrategy::push_pull_if_finite(TrainingState& state, const StepContext& context) {
  if (!context.guard->admits(state.grads().flat(), [&] {
        return NonFiniteGuard::Refusal{
            .action = fmt::format("held back the gradient of local step {} at global step {}",
                                  context.local_step, client_->global_step()),
            .subject = "it",
            .consequence = "the ps values are unchanged"};
      })) {
    ++nonfinite_rounds_;
    return;
  }
  const RoundOutcome outcome = client_->push_pull(state.grads(), state.params(), context.lr);
  stale_rounds_ += outcome.stale > 0 ? 1 : 0;
  nonfinite_rounds_ += outcome.rejected > 0 ? 1 : 0;
}

}  // namespace dtrain
