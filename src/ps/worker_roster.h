// A ps task's view of its training workers: which are connected, lost (since when, from where),
// given up, failed or done; what a sync ps does when too few are left for a step; and the wait,
// in PsService::run, until each one is accounted for.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ps/ps_service_options.h"
#include "ps/shard_store.h"

namespace dtrain {

// Thread-safe: the connections' threads report, run()'s thread waits.
class WorkerRoster {
 public:
  // REQUIRES: options and store outlive the roster; options.min_workers in
  // 0..sync.total_num_replicas (checked once, by its flag's row or against the chief's settings).
  WorkerRoster(const PsServiceOptions& options, ShardStore& store);
  WorkerRoster(const WorkerRoster&) = delete;
  WorkerRoster& operator=(const WorkerRoster&) = delete;

  // A connection said hello as `worker` (which comes back, if it was lost), from `address`.
  void connected(int worker, const std::string& address);
  // One of its connections ended; with the last one, the worker is lost until it comes back or
  // worker_timeout_ms passes.
  void disconnected(int worker);
  // Its hello was refused (another model, say), from `address`, for `why`: the waits name that
  // instead of "not connected yet", until it connects as it should. Out-of-range workers are
  // ignored (the refusal itself names them).
  void refused(int worker, const std::string& address, std::string why);
  // It said it failed (kWorkerFailed), with why: given up at once.
  void failed(int worker, std::string why);
  // It reported the end of training.
  void done(int worker);
  // It said it stops before the end (a signal): when its connections close, it left.
  void stopping(int worker);
  // An async job that takes joining workers: the identity for the next one, held for it until it
  // says hello or worker_timeout_ms passes — the lowest of the job's own workers given up as lost,
  // else the lowest joiner's identity free (never used, or whose worker left). One claim a
  // process (`claimer`, Connection::peer_incarnation): a process that asks again, as one whose
  // reply was cut does, gets the identity held for it. Throws Error when there is none, naming
  // the bound.
  int claim(uint64_t claimer);
  bool takes_joiners() const;
  // Workers with a connection open now.
  int connected_workers();

  // Blocks until every training worker (0..total_num_replicas-1) has reported done, been given
  // up as lost, or was lost and training has finished — or, once a stop is requested, until no
  // worker is connected. Gives up on lost workers on the way, applying on_worker_loss (which may
  // abort the store), and says every wait_report_interval_ms who is still waited for. Returns,
  // where no step failed and every worker ended before the end of training, why (one line naming
  // each); else empty.
  std::string wait();

 private:
  // Each training worker's state as this task sees it.
  struct WorkerState {
    int connections = 0;  // open connections that said hello as this worker
    bool seen = false;    // said hello at least once
    bool done = false;
    bool given_up = false;
    std::optional<std::chrono::steady_clock::time_point> lost_since;
    std::optional<std::string> failure;  // why it said it failed (kWorkerFailed)
    std::string address;                 // of its last connection
    std::optional<std::string> refusal;  // why its last hello was refused, until one is taken
    // An elastic job: it is out of the job (since `left`, why), until it connects again.
    bool away = false;
    bool stopping = false;  // said it stops before the end
    // Handed to a joining worker at this time, which has not said hello yet.
    std::optional<std::chrono::steady_clock::time_point> claimed_at;
    uint64_t claimed_by = 0;  // ... by this process
    std::string left;         // "left at step 412 (it stopped)", "was lost at step 40"
  };

  // REQUIRES: mutex_ held (so for every function below). An elastic sync job: the worker's last
  // connection closed (it left) or it came back (joined); the gradients a step takes follow the
  // workers in the job, and every reply says so. Too few left abort the store, naming who left.
  void leave(int worker);
  void join(int worker);
  bool elastic() const { return options_.min_workers > 0 && options_.sync.sync_replicas; }
  // Changes of the workers are counted and told in every reply: an elastic sync job, or an async
  // one that takes joiners.
  bool counts_workers() const { return elastic() || takes_joiners(); }
  // The job's own workers, waited for; identities from here on are joiners'.
  int planned() const;
  int workers_in_job() const;
  void note_change(int worker, bool joined);
  // ", 2 gradients a step" for an elastic sync job; empty otherwise.
  std::string per_step_words() const;
  // Gives up on workers lost longer than
  // worker_timeout_ms, and on failed ones at once.
  void check_lost_workers();
  // Where training has not finished, no worker is left, and some said they failed: why (one line
  // naming each worker), for run() to end with. Else empty.
  std::string all_workers_failed() const;
  // Once training is finished, a worker that never connected is waited for up to
  // worker_timeout_ms (saying so), then given up: a ps never waits silently.
  void check_absent_workers();
  bool all_workers_accounted_for() const;
  // One line naming the workers still waited for, if any.
  void report_waits() const;
  // A stop was requested, and no worker is connected any more or the shutdown timeout is near;
  // the first call that sees the request halts the store.
  bool stopped();

  const PsServiceOptions& options_;
  ShardStore& store_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<WorkerState> workers_;  // guarded by mutex_
  // When wait() first saw training finished, guarded by mutex_.
  std::optional<std::chrono::steady_clock::time_point> finished_since_;
  std::optional<std::chrono::steady_clock::time_point> stop_deadline_;  // guarded by mutex_
  uint32_t changes_ = 0;  // an elastic job's membership changes, guarded by mutex_
  uint32_t left_ = 0;     // ... of which workers that left
};

}  // namespace dtrain
