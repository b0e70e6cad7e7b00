// The bookkeeping of a ps task's training workers, and PsService::run's wait over it.
#include "ps/worker_roster.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cassert>
#include <utility>

#include "base/error.h"
#include "base/stop_request.h"

namespace dtrain {

WorkerRoster::WorkerRoster(const PsServiceOptions& options, ShardStore& store)
    : options_(options),
      store_(store),
      workers_(static_cast<size_t>(options.sync.total_num_replicas)) {
  // The flag's row checked it (plan/flag_checks.cc), the chief's settings when learnt
  // (train/ps_job_settings.cc).
  assert(options.min_workers >= 0 && options.min_workers <= options.sync.total_num_replicas);
  if (options.planned_workers < 0 || options.planned_workers > options.sync.total_num_replicas) {
    throw UsageError(fmt::format("--max_workers {}: must be at least --workers ({})",
                                 options.sync.total_num_replicas, options.planned_workers));
  }
  if (counts_workers()) store_.note_workers({.workers = planned()});
}

int WorkerRoster::connected_workers() {
  std::lock_guard lock(mutex_);
  return static_cast<int>(std::count_if(workers_.begin(), workers_.end(),
                                        [](const WorkerState& w) { return w.connections > 0; }));
}

int WorkerRoster::planned() const {
  return options_.planned_workers > 0 ? options_.planned_workers : options_.sync.total_num_replicas;
}

bool WorkerRoster::takes_joiners() const {
  return !options_.sync.sync_replicas && planned() < options_.sync.total_num_replicas;
}

int WorkerRoster::claim(uint64_t claimer) {
  std::lock_guard lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  const auto hold = std::chrono::milliseconds(options_.worker_timeout_ms);
  const int total = static_cast<int>(workers_.size());
  for (int worker = 0; worker < total; ++worker) {
    const WorkerState& w = workers_[static_cast<size_t>(worker)];
    if (w.connections == 0 && w.claimed_at && now - *w.claimed_at < hold &&
        w.claimed_by == claimer) {
      return worker;
    }
  }
  for (int worker = 0; worker < total; ++worker) {
    WorkerState& w = workers_[static_cast<size_t>(worker)];
    if (w.connections > 0 || w.done || (w.claimed_at && now - *w.claimed_at < hold)) continue;
    // The job's own workers may still be restarted, as themselves, until they are given up.
    const bool free = worker < planned() ? w.given_up : !w.seen || w.away || w.given_up;
    if (!free) continue;
    w.claimed_at = now;
    w.claimed_by = claimer;
    return worker;
  }
  throw Error(fmt::format(
      "no worker identity is free: workers 0..{} are the job's own (one is free once lost for "
      "--worker_timeout {} s), and {}..{} are in the job (--max_workers {})",
      planned() - 1, options_.worker_timeout_ms / 1000, planned(), total - 1, total));
}

std::string WorkerRoster::wait() {
  const auto report_interval = std::chrono::milliseconds(options_.wait_report_interval_ms);
  auto next_report = std::chrono::steady_clock::now() + report_interval;
  std::unique_lock lock(mutex_);
  while (!all_workers_accounted_for() && !store_.aborted() && !stopped()) {
    // Woken by every connection, loss and report; the slice bounds how late a worker's timeout
    // is noticed, and a wait reported.
    changed_.wait_for(
        lock, std::min<std::chrono::milliseconds>(std::chrono::milliseconds(500), report_interval));
    check_lost_workers();
    check_absent_workers();
    if (const auto now = std::chrono::steady_clock::now(); now >= next_report) {
      report_waits();
      next_report = now + report_interval;
    }
  }
  if (store_.aborted()) {
    // Each waiting worker is being told why; it closes its connections once it has read it.
    // Bounded, for a worker that does not.
    changed_.wait_for(lock, std::chrono::seconds(10), [&] {
      return std::all_of(workers_.begin(), workers_.end(),
                         [](const WorkerState& w) { return w.connections == 0; });
    });
  }
  return store_.aborted() ? std::string() : all_workers_failed();
}

std::string WorkerRoster::all_workers_failed() const {
  if (store_.finished()) return {};
  std::vector<std::string> why;
  bool any_failed = false;
  for (size_t worker = 0; worker < workers_.size(); ++worker) {
    const WorkerState& w = workers_[worker];
    if (static_cast<int>(worker) >= planned() && !w.seen) continue;  // no joiner came
    if (!w.given_up) return {};
    any_failed = any_failed || w.failure.has_value();
    why.push_back(w.failure ? fmt::format("worker {} failed: {}", worker, *w.failure)
                            : fmt::format("worker {} was lost and did not come back", worker));
  }
  if (!any_failed) return {};
  return fmt::format("every worker ended before training finished, at step {}; {}; exiting",
                     store_.reported_step(), fmt::join(why, "; "));
}

bool WorkerRoster::stopped() {
  if (options_.stop == nullptr || !options_.stop->requested()) return false;
  const auto now = std::chrono::steady_clock::now();
  if (!stop_deadline_) {
    // A second short of the process's own limit (cli/shutdown.h), to end in order.
    stop_deadline_ =
        now + std::chrono::milliseconds(std::max(0, options_.shutdown_timeout_ms - 1000));
    store_.halt();
    spdlog::info(
        "ps{}: stopping ({}) at step {}: every worker is told to stop; waiting up to {} s for them "
        "to leave",
        options_.ps, signal_name(options_.stop->signal()), store_.reported_step(),
        options_.shutdown_timeout_ms / 1000);
  }
  const bool none_connected = std::all_of(workers_.begin(), workers_.end(),
                                          [](const WorkerState& w) { return w.connections == 0; });
  return none_connected || now >= *stop_deadline_;
}

bool WorkerRoster::all_workers_accounted_for() const {
  // Once training is over, a worker that was lost will not report: nothing to wait for. One
  // never seen may still be starting, and is waited for (check_absent_workers bounds that), as
  // its own report ends it quickly.
  const bool finished = store_.finished();
  for (size_t worker = 0; worker < workers_.size(); ++worker) {
    const WorkerState& w = workers_[worker];
    const bool joiner_never_came = static_cast<int>(worker) >= planned() && !w.seen;
    if (!(w.done || w.given_up || (finished && w.lost_since.has_value()) || joiner_never_came))
      return false;
  }
  return true;
}

void WorkerRoster::connected(int worker, const std::string& address) {
  std::lock_guard lock(mutex_);
  WorkerState& w = workers_[static_cast<size_t>(worker)];
  w.address = address;
  w.refusal.reset();
  if ((w.lost_since || w.failure) && !w.away) {
    spdlog::info("ps{}: worker {} is back", options_.ps, worker);
  }
  if (w.lost_since || w.failure) {
    w.lost_since.reset();
    w.failure.reset();
    w.given_up = false;
  }
  ++w.connections;
  const bool new_joiner = !w.seen && worker >= planned();
  w.seen = true;
  w.claimed_at.reset();
  if (counts_workers() && (w.away || new_joiner)) join(worker);
  changed_.notify_all();
}

int WorkerRoster::workers_in_job() const {
  int workers = 0;
  for (size_t worker = 0; worker < workers_.size(); ++worker) {
    const WorkerState& w = workers_[worker];
    workers += !w.away && (static_cast<int>(worker) < planned() || w.seen) ? 1 : 0;
  }
  return workers;
}

void WorkerRoster::note_change(int worker, bool joined) {
  const int workers = workers_in_job();
  left_ += joined ? 0 : 1;
  store_.note_workers({.changes = ++changes_,
                       .left = left_,
                       .workers = workers,
                       .worker = worker,
                       .joined = static_cast<uint8_t>(joined),
                       .step = store_.reported_step()});
}

void WorkerRoster::leave(int worker) {
  WorkerState& w = workers_[static_cast<size_t>(worker)];
  w.away = true;
  const int workers = workers_in_job();
  // Sync: a step that already holds the gradients of those left is applied on the way; the leave
  // is dated by the step the job goes on from.
  if (elastic() && workers >= options_.min_workers) {
    store_.set_replicas(std::min(workers, aggregate_count(options_.sync)));
  }
  const int64_t step = store_.reported_step();
  w.left = w.failure    ? fmt::format("failed at step {} ({})", step, *w.failure)
           : w.stopping ? fmt::format("left at step {} (it stopped)", step)
                        : fmt::format("was lost at step {}", step);
  if (elastic() && workers < options_.min_workers) {
    std::vector<std::string> gone;
    for (size_t k = 0; k < workers_.size(); ++k) {
      if (workers_[k].away) gone.push_back(fmt::format("worker{} {}", k, workers_[k].left));
    }
    const std::string reason = fmt::format("{}: {} worker(s) remain, fewer than --min_workers {}",
                                           fmt::join(gone, "; "), workers, options_.min_workers);
    spdlog::error("ps{}: {}", options_.ps, reason);
    store_.abort(reason);
    return;
  }
  note_change(worker, /*joined=*/false);
  spdlog::warn("ps{}: worker{} {}: {} workers now{}", options_.ps, worker, w.left, workers,
               per_step_words());
}

void WorkerRoster::join(int worker) {
  WorkerState& w = workers_[static_cast<size_t>(worker)];
  w.away = false;
  w.stopping = false;
  const int workers = workers_in_job();
  if (elastic()) store_.set_replicas(std::min(workers, aggregate_count(options_.sync)));
  note_change(worker, /*joined=*/true);
  spdlog::info("ps{}: worker{} joined at step {}: {} workers now{}", options_.ps, worker,
               store_.reported_step(), workers, per_step_words());
}

std::string WorkerRoster::per_step_words() const {
  return elastic() ? fmt::format(", {} gradients a step", store_.replicas_to_aggregate()) : "";
}

void WorkerRoster::report_waits() const {
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::string> waits;
  for (size_t worker = 0; worker < workers_.size(); ++worker) {
    const WorkerState& w = workers_[worker];
    if (w.done || w.given_up || w.connections > 0) continue;
    if (static_cast<int>(worker) >= planned() && !w.seen) continue;  // a joiner's, unused
    if (w.lost_since) {
      const double left =
          std::chrono::duration<double>(std::chrono::milliseconds(options_.worker_timeout_ms) -
                                        (now - *w.lost_since))
              .count();
      waits.push_back(fmt::format("worker {} (lost from {}; {:.0f} s left)", worker, w.address,
                                  std::max(0.0, left)));
    } else if (w.refusal) {
      waits.push_back(fmt::format("worker {} (refused: {})", worker, *w.refusal));
    } else {
      waits.push_back(fmt::format("worker {} (not connected yet)", worker));
    }
  }
  if (waits.empty()) return;
  spdlog::info("ps{}: still waiting for {}", options_.ps, fmt::join(waits, ", "));
}

void WorkerRoster::disconnected(int worker) {
  std::lock_guard lock(mutex_);
  WorkerState& w = workers_[static_cast<size_t>(worker)];
  if (--w.connections == 0 && !w.done) {
    w.lost_since = std::chrono::steady_clock::now();
    if (counts_workers() && !store_.finished() && !store_.aborted()) {
      leave(worker);
    } else {
      spdlog::warn("ps{}: lost worker {} at step {}; waiting up to {} s for it to come back",
                   options_.ps, worker, store_.reported_step(), options_.worker_timeout_ms / 1000);
    }
  }
  changed_.notify_all();
}

void WorkerRoster::check_lost_workers() {
  const auto now = std::chrono::steady_clock::now();
  const int total = static_cast<int>(workers_.size());
  for (int worker = 0; worker < total; ++worker) {
    WorkerState& w = workers_[static_cast<size_t>(worker)];
    const bool timed_out = w.lost_since && now - *w.lost_since >= std::chrono::milliseconds(
                                                                      options_.worker_timeout_ms);
    if (w.given_up || !(timed_out || w.failure)) continue;
    w.given_up = true;
    const int left = static_cast<int>(std::count_if(
        workers_.begin(), workers_.end(), [](const WorkerState& s) { return !s.given_up; }));
    const int needed = store_.replicas_to_aggregate();
    const int64_t step = store_.reported_step();
    const std::string gone =
        w.failure ? fmt::format("failed ({})", *w.failure)
                  : fmt::format("did not come back within {} s", options_.worker_timeout_ms / 1000);
    // An elastic job's step counts followed its workers already (leave()).
    if (!options_.sync.sync_replicas || left >= needed || elastic()) {
      spdlog::warn("ps{}: worker {} {}; going on without it", options_.ps, worker, gone);
    } else if (options_.on_worker_loss == WorkerLossPolicy::kContinue && left > 0) {
      spdlog::warn(
          "ps{}: worker {} {}; a step now takes {} gradients instead of {} (--on_worker_loss "
          "continue), from step {}",
          options_.ps, worker, gone, left, needed, step);
      store_.set_replicas(left);
    } else {
      const std::string reason = fmt::format(
          "worker {} was lost at step {} and {}{}; a step needs {} gradients and {} workers are "
          "left, so training stops (--on_worker_loss stop; give --on_worker_loss continue to go "
          "on with fewer)",
          worker, step, gone, w.failure ? "" : " (--worker_timeout)", needed, left);
      spdlog::error("ps{}: {}", options_.ps, reason);
      store_.abort(reason);
    }
  }
}

void WorkerRoster::check_absent_workers() {
  if (!store_.finished()) return;
  const auto now = std::chrono::steady_clock::now();
  std::vector<int> absent;
  for (size_t worker = 0; worker < static_cast<size_t>(planned()); ++worker) {
    const WorkerState& w = workers_[worker];
    if (!w.seen && !w.done && !w.given_up) absent.push_back(static_cast<int>(worker));
  }
  if (absent.empty()) return;
  const int64_t timeout_s = options_.worker_timeout_ms / 1000;
  if (!finished_since_) {
    finished_since_ = now;
    spdlog::warn(
        "ps{}: training finished at step {}; waiting up to {} s (--worker_timeout) for worker {}, "
        "which never connected",
        options_.ps, store_.reported_step(), timeout_s, fmt::join(absent, ", "));
    return;
  }
  if (now - *finished_since_ < std::chrono::milliseconds(options_.worker_timeout_ms)) return;
  for (int worker : absent) {
    workers_[static_cast<size_t>(worker)].given_up = true;
    spdlog::warn(
        "ps{}: worker {} never connected within {} s of the end of training; ending "
        "without it",
        options_.ps, worker, timeout_s);
  }
}

void WorkerRoster::refused(int worker, const std::string& address, std::string why) {
  std::lock_guard lock(mutex_);
  if (worker < 0 || static_cast<size_t>(worker) >= workers_.size()) return;
  WorkerState& w = workers_[static_cast<size_t>(worker)];
  w.address = address;
  w.refusal = fmt::format("its hello from {} {}", address, why);
}

void WorkerRoster::failed(int worker, std::string why) {
  {
    std::lock_guard lock(mutex_);
    workers_[static_cast<size_t>(worker)].failure = std::move(why);
  }
  changed_.notify_all();
}

void WorkerRoster::stopping(int worker) {
  std::lock_guard lock(mutex_);
  workers_[static_cast<size_t>(worker)].stopping = true;
}

void WorkerRoster::done(int worker) {
  {
    std::lock_guard lock(mutex_);
    workers_[static_cast<size_t>(worker)].done = true;
  }
  changed_.notify_all();
}

}  // namespace dtrain
