// What one parameter-server task holds and does (DESIGN.md §5): the values, optimizer slots and
// step of the shards the partition map gives it, updated from pushed gradients — at once (async),
// or averaged over R replicas once per step (sync). Pure logic: the ps service puts it on the wire.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nn/param_set.h"
#include "optim/optimizer.h"
#include "ps/partition.h"
#include "ps/push_result.h"
#include "ps/sync_options.h"
#include "ps/worker_count.h"
#include "tensor/aligned.h"

namespace dtrain {

// A worker's sequence grows by one a round; how far past the next expected one a push may be,
// and the highest a ps takes from a worker it has not heard from yet (far from wrapping).
inline constexpr uint64_t kMaxSequenceAhead = 1024;
inline constexpr uint64_t kMaxSequence = uint64_t{1} << 62;

// Shards are named by their index into PartitionMap::shards, the same on every task. Every call
// that takes one REQUIRES that this task holds it (see shards()); a broken request — a shard held
// elsewhere, a span of the wrong length, a worker id out of range, a push or read before the shard
// is initialised, the wrong mode's push — throws Error naming it.
//
// Thread-safety: every method may be called from any number of threads. Each shard has its own
// mutex, so pushes to different shards run in parallel; a second mutex guards the count of
// initialised shards. No call ever holds two of these locks, so there is no lock order to keep.
// Waits on condition variables always carry a deadline.

class ShardStore {
 public:
  using Deadline = std::chrono::steady_clock::time_point;

  // REQUIRES: map was made for the layout of `specs`; 0 <= ps < map.num_ps();
  // optimizer.name is one of optimizer_names(), clipping not by a global norm, nor by a norm of
  // a variable cut into shards; sync.total_num_replicas >= 1 and
  // 0 <= sync.replicas_to_aggregate <= total_num_replicas. Otherwise throws UsageError naming the
  // flag, or Error for a map of another layout.
  // Allocates everything the store will ever need: values, slots and the sync accumulator for
  // the shards this task holds, laid out contiguously in that order.
  ShardStore(const std::vector<ParamSpec>& specs, const PartitionMap& map, int ps,
             const OptimizerConfig& optimizer, const SyncOptions& sync);
  ~ShardStore();
  ShardStore(const ShardStore&) = delete;
  ShardStore& operator=(const ShardStore&) = delete;

  int ps() const { return ps_; }
  // The shards this task holds: indices into PartitionMap::shards, ascending.
  const std::vector<size_t>& shards() const { return shards_; }
  size_t shard_size(size_t shard) const;
  // The optimizer's slot names ("adam_m", "adam_v"; none for SGD), in read_slot's order.
  const std::vector<std::string>& slot_suffixes() const { return slot_suffixes_; }
  // R: gradients averaged into each sync step.
  int replicas_to_aggregate() const { return replicas_to_aggregate_; }
  // Sync: from now on a step takes r gradients — fewer for a worker lost for good
  // (--on_worker_loss continue) or gone from an elastic job, more again, up to the R the store
  // was made with, when it comes back. A step that already holds r or more is averaged over what
  // it holds and applied at once, at the learning rate of its last push. Throws Error for r
  // outside 1..that R.
  void set_replicas(int r);
  // An elastic job's workers, as the ps's roster counts them, for every shard reply to carry.
  void note_workers(const WorkerCount& count);
  WorkerCount workers() const;
  // workers().changes, without a lock: what every shard reply carries.
  uint32_t worker_changes() const { return worker_changes_; }

  // The chief's initialisation or restore: sets the shard's values and step, and its slots from
  // `slots` (one span per slot_suffixes() entry) or to zero when `slots` is empty. Discards a
  // partly accumulated sync step; keeps the counters and the sequences already seen. Wakes
  // wait_initialized and wait_step_past. REQUIRES: every span has shard_size(shard) values.
  void initialize(size_t shard, std::span<const float> values, int64_t step,
                  std::span<const std::span<const float>> slots = {});
  // True when every shard this task holds has been initialised.
  bool initialized() const;
  // Waits until initialized(), the deadline, or the end of training (finish(), abort(), halt():
  // nothing will initialise it then); returns initialized().
  bool wait_initialized(Deadline deadline) const;

  // A pull: copies the shard's current values into out and returns its step.
  // REQUIRES: out.size() == shard_size(shard); the shard is initialised.
  int64_t read(size_t shard, std::span<float> out) const;
  // A read without a buffer between: calls out(values, step) with the shard's current values and
  // step under its lock, so that they are copied once, straight to where they go (by a worker
  // that copies them out of this process's memory before the send returns). `out` may read the
  // store's flags (finished(), halting()) but call nothing else in it; what it throws is thrown
  // on, after the lock is released. REQUIRES: the shard is initialised.
  template <typename Out>
  void read_to(size_t shard, const Out& out) const {
    read_to(
        shard,
        [](const void* o, std::span<const float> v, int64_t step) {
          (*static_cast<const Out*>(o))(v, step);
        },
        &out);
  }
  // Copies slot k (see slot_suffixes()) of the shard, for a checkpoint.
  // REQUIRES: k < slot_suffixes().size(); out.size() == shard_size(shard); initialised.
  void read_slot(size_t shard, size_t k, std::span<float> out) const;

  // Both modes check the gradient first: one holding a NaN or an infinity would poison the values
  // (and, through Adam's slots, every later step), so it is kRejected and counted instead; its
  // sequence is spent, so a retry of it is a kDuplicate.
  //
  // Async: applies grad at learning rate lr at once. Exactly-once: a push whose sequence is not
  // above the last one this worker had handled on this shard is a kDuplicate and changes nothing,
  // so sequences must increase per (worker, shard) — one counter per worker over all shards will
  // do. Returns kApplied with the step after the update, or kDuplicate with the current step.
  // Both modes throw Error for a sequence more than kMaxSequenceAhead past the next one expected
  // (once the worker has pushed here), or above kMaxSequence: one such push would make every
  // later push of the worker a kDuplicate.
  // REQUIRES: not sync_replicas; 0 <= worker < total_num_replicas; grad.size() == shard_size.
  PushResult push_async(size_t shard, int worker, uint64_t sequence, std::span<const float> grad,
                        float lr);

  // Sync (SyncReplicasOptimizer, with at most one gradient per worker per step): in order,
  //   a sequence already handled (a retry)                        -> kDuplicate;
  //   a gradient with a NaN or an infinity                        -> kRejected, not counted;
  //   computed_at_step != the shard's step (a late or backup one) -> kStale, dropped and counted;
  //   a second gradient from this worker in this step             -> kDuplicate;
  //   otherwise counted: the R-th of the step averages the R (sum / R), applies the optimizer
  //   once at this push's lr (every worker derives lr from the same step), advances the step
  //   and wakes wait_step_past -> kApplied; the others -> kAccepted.
  // A newer computed_at_step (only a ps restored behind its workers sees one) is stale too.
  // REQUIRES: sync_replicas; 0 <= worker < total_num_replicas; grad.size() == shard_size.
  PushResult push_sync(size_t shard, int worker, uint64_t sequence, int64_t computed_at_step,
                       std::span<const float> grad, float lr);

  // The token: waits until the shard's step is above `step`, training is finished, or the
  // deadline passes, and returns the shard's step then (still <= step on timeout or finish: a
  // value, not an exception).
  int64_t wait_step_past(size_t shard, int64_t step, Deadline deadline) const;

  // Training is over (a worker reached the last step): wakes every wait_step_past for good, since
  // a step short of its R gradients will never get them.
  void finish();
  bool finished() const;
  // The task is stopping (a signal asked it to) before training is over: wakes every
  // wait_step_past for good, as finish() does, but the run is not over; replies say so, and the
  // workers stop too.
  void halt();
  bool halting() const;
  // Training cannot go on (a sync step will never get its gradients): wakes every wait_step_past
  // for good, as finish() does; aborted() then says why.
  void abort(std::string reason);
  std::optional<std::string> aborted() const;
  // Sync: when the shard's last step was applied (its replies' wait ended); the epoch before one.
  std::chrono::steady_clock::time_point advanced_at(size_t shard) const;
  // Sync, --stall_warning: a reply has waited `waited` for step `step` of `shard` to complete, for
  // the `report`-th time (0, 1, ...: at the warning and at doubling intervals). The line that
  // names the workers whose gradients have not come ("step 41 of shard 0 has waited 3.0 s for its
  // gradients: 1 of the 2 it takes are in; none yet from worker1"), once per step and interval
  // over all the replies waiting for it; nullopt when another reply said so, or the step is done.
  std::optional<std::string> stalled_step(size_t shard, int64_t step, int report,
                                          double waited) const;

  // The lowest sequence not yet handled from this worker on this shard: where a restarted worker
  // continues its numbering. REQUIRES: 0 <= worker < total_num_replicas.
  uint64_t next_sequence(size_t shard, int worker) const;

  ShardCounters counters(size_t shard) const;
  // The step of this task's first shard (0 if it holds none): what its messages report.
  int64_t reported_step() const;

 private:
  struct LocalShard;
  LocalShard& local(size_t shard) const;
  void check_worker(const LocalShard& s, int worker) const;
  // REQUIRES: s.mutex held. Throws Error for a sequence far beyond `next` (see push_async).
  void check_sequence(const LocalShard& s, int worker, uint64_t sequence, uint64_t next) const;
  void apply(LocalShard& s, std::span<const float> grad, float lr);
  void read_to(size_t shard, void (*call)(const void*, std::span<const float>, int64_t),
               const void* out) const;
  void apply_step(LocalShard& s);
  void wake_initialization_waiters();

  int ps_;
  bool sync_replicas_;
  int total_num_replicas_;
  int configured_replicas_;  // R as the flags set it: the most set_replicas raises it to
  std::atomic<int> replicas_to_aggregate_;
  std::vector<std::string> slot_suffixes_;
  std::vector<size_t> shards_;    // held shards, as indices into the map
  std::vector<size_t> local_of_;  // map index -> index into local_, or kNotHeld
  std::unique_ptr<LocalShard[]> local_;
  // The arenas: each held shard owns [offset, offset + size) of values_ and accumulator_, and of
  // each slot's part of slots_. They never reallocate after construction, and a shard's ranges
  // are touched only under that shard's mutex.
  FloatBuffer values_;
  FloatBuffer slots_;        // slot k of a shard at k * local_values_ + offset
  FloatBuffer accumulator_;  // sync only: the sum of the current step's gradients
  FloatBuffer clipped_;      // a clipping optimizer's copy of the gradient being applied
  size_t local_values_ = 0;

  std::atomic<bool> finished_ = false;
  std::atomic<bool> halting_ = false;
  mutable std::atomic<int64_t> stall_reported_ = -1;  // step × kStallReports + report, said last
  mutable std::mutex workers_mutex_;
  WorkerCount workers_;  // guarded by workers_mutex_
  std::atomic<uint32_t> worker_changes_ = 0;
  mutable std::mutex abort_mutex_;
  std::optional<std::string> abort_reason_;  // guarded by abort_mutex_

  mutable std::mutex init_mutex_;
  mutable std::condition_variable init_changed_;
  size_t initialized_count_ = 0;  // guarded by init_mutex_
};

}  // namespace dtrain
