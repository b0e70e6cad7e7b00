// ShardStore: per-shard locks, exactly-once bookkeeping and the sync accumulator. An update is
// TensorFlow's rule (Optimizer::apply_range) over one shard's contiguous range of the arenas.
#include "ps/shard_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "base/error.h"
#include "ps/shard_clipping.h"
#include "tensor/ops.h"

namespace dtrain {
namespace {

constexpr size_t kNotHeld = SIZE_MAX;
// Each shard starts on its own cache line, so two shard locks never guard one line between them.
constexpr size_t kAlignFloats = 16;
constexpr size_t kMaxSlots = Optimizer::kMaxSlots;
constexpr int64_t kNoStep = INT64_MIN;

size_t round_up(size_t n) { return (n + kAlignFloats - 1) / kAlignFloats * kAlignFloats; }

}  // namespace

struct ShardStore::LocalShard {
  size_t index = 0;   // into PartitionMap::shards
  size_t offset = 0;  // of its ranges in values_, accumulator_ and each slot's part of slots_
  size_t size = 0;
  // Made with no specs, so it holds no slots of its own: only its update rule is used. One per
  // shard, so that no object is shared between two shard locks.
  std::unique_ptr<Optimizer> optimizer;
  // A statistic's shard (ParamSpec::trainable false): pushes carry deltas, applied as they are.
  bool assigned = false;

  mutable std::mutex mutex;
  mutable std::condition_variable step_advanced;
  // Guarded by mutex, as are this shard's ranges of the arenas.
  bool initialized = false;
  int64_t step = 0;
  int accumulated = 0;  // sync: gradients summed into this step so far
  float last_lr = 0;    // sync: the learning rate of the step's last push
  std::chrono::steady_clock::time_point advanced_at;  // sync: when its last step was applied
  std::vector<uint64_t> next_sequence;    // per worker: the lowest sequence not yet handled
  std::vector<int64_t> contributed_step;  // per worker: the step of its last counted gradient
  ShardCounters counters;                 // counters.step unused: see step
};

ShardStore::ShardStore(const std::vector<ParamSpec>& specs, const PartitionMap& map, int ps,
                       const OptimizerConfig& optimizer, const SyncOptions& sync)
    : ps_(ps),
      sync_replicas_(sync.sync_replicas),
      total_num_replicas_(sync.total_num_replicas),
      configured_replicas_(aggregate_count(sync)),
      replicas_to_aggregate_(configured_replicas_) {
  if (ps < 0 || ps >= map.num_ps()) {
    throw UsageError(
        fmt::format("--task_index {}: the partition map has ps tasks 0..{}", ps, map.num_ps() - 1));
  }
  check_map_matches(specs, map);  // once, here: every offset below comes from the map
  slot_suffixes_ = make_optimizer(optimizer, {})->slot_suffixes();
  if (slot_suffixes_.size() > kMaxSlots)
    throw Error(fmt::format("optimizer {}: more slots than the ps store keeps", optimizer.name));

  shards_ = map.shards_of_ps[static_cast<size_t>(ps)];
  local_of_.assign(map.shards.size(), kNotHeld);
  local_ = std::make_unique<LocalShard[]>(shards_.size());
  size_t offset = 0;
  for (size_t i = 0; i < shards_.size(); ++i) {
    LocalShard& s = local_[i];
    s.index = shards_[i];
    s.offset = offset;
    s.size = map.shards[shards_[i]].size();
    s.optimizer = make_optimizer(optimizer, {});
    s.assigned = !specs[map.shards[shards_[i]].tensor].trainable;
    s.next_sequence.assign(static_cast<size_t>(total_num_replicas_), 0);
    s.contributed_step.assign(static_cast<size_t>(total_num_replicas_), kNoStep);
    local_of_[shards_[i]] = i;
    offset += round_up(s.size);
  }
  local_values_ = offset;
  if (make_optimizer(optimizer, {})->clips()) {
    refuse_clipping_across_shards(specs, map, shards_, optimizer);
    clipped_.assign(local_values_, 0.0f);
  }
  values_.assign(local_values_, 0.0f);
  slots_.assign(local_values_ * slot_suffixes_.size(), 0.0f);
  if (sync_replicas_) accumulator_.assign(local_values_, 0.0f);
}

ShardStore::~ShardStore() = default;

ShardStore::LocalShard& ShardStore::local(size_t shard) const {
  if (shard >= local_of_.size() || local_of_[shard] == kNotHeld) {
    throw Error(fmt::format("shard {} is not held by ps task {} (the map has {} shards)", shard,
                            ps_, local_of_.size()));
  }
  return local_[local_of_[shard]];
}

namespace {

void check_size(size_t index, size_t expected, size_t given, std::string_view what) {
  if (given != expected) {
    throw Error(fmt::format("shard {}: {} of {} values, but the shard holds {}", index, what, given,
                            expected));
  }
}

// REQUIRES: the shard's mutex is held (initialized is guarded by it).
void check_initialized(bool initialized, size_t index, int ps) {
  if (!initialized) {
    throw Error(fmt::format(
        "shard {} on ps task {} used before the chief initialised it (wait_initialized first)",
        index, ps));
  }
}

}  // namespace

void ShardStore::check_worker(const LocalShard& s, int worker) const {
  if (worker < 0 || worker >= total_num_replicas_) {
    throw Error(
        fmt::format("push to shard {} from worker {}: this ps task expects workers 0..{} "
                    "(--total_num_replicas)",
                    s.index, worker, total_num_replicas_ - 1));
  }
}

void ShardStore::check_sequence(const LocalShard& s, int worker, uint64_t sequence,
                                uint64_t next) const {
  // A worker numbers its rounds, one a round, so a push is never past the next one expected.
  // Until this task has heard from the worker (it is new, or restored from a checkpoint, which
  // keeps no sequences) it takes the worker's number as it comes; below the cap, so that the
  // number after it never wraps.
  const bool too_far =
      next > 0 ? sequence - std::min(sequence, next) > kMaxSequenceAhead : sequence > kMaxSequence;
  if (!too_far) return;
  throw Error(fmt::format(
      "push to shard {} from worker {} carries sequence {}, far beyond the next one expected ({}): "
      "refused, or the worker's own pushes would be taken for retries",
      s.index, worker, sequence, next));
}

size_t ShardStore::shard_size(size_t shard) const { return local(shard).size; }

// REQUIRES: s.mutex is held.
void ShardStore::apply(LocalShard& s, std::span<const float> grad, float lr) {
  // A fixed array, not a vector: this runs on every push and the steady state allocates nothing.
  std::array<std::span<float>, kMaxSlots> slot_ranges;
  for (size_t k = 0; k < slot_suffixes_.size(); ++k)
    slot_ranges[k] = {slots_.data() + k * local_values_ + s.offset, s.size};
  if (s.assigned) {
    assign_deltas({values_.data() + s.offset, s.size}, grad);
  } else {
    if (!clipped_.empty()) {
      // Keras clips the gradient the update uses: here the push (async) or the step's average.
      float* copy = clipped_.data() + s.offset;
      std::copy(grad.begin(), grad.end(), copy);
      s.optimizer->clip_range({copy, s.size});
      grad = {copy, s.size};
    }
    s.optimizer->apply_range(
        {values_.data() + s.offset, s.size}, grad,
        std::span<const std::span<float>>(slot_ranges.data(), slot_suffixes_.size()), lr, s.step);
  }
  ++s.step;
  ++s.counters.applied;
  s.step_advanced.notify_all();
}

void ShardStore::initialize(size_t shard, std::span<const float> values, int64_t step,
                            std::span<const std::span<const float>> slots) {
  LocalShard& s = local(shard);
  check_size(s.index, s.size, values.size(), "initial values");
  // A negative step would reach Adam's bias correction as a power of a negative count.
  if (step < 0)
    throw Error(fmt::format("shard {}: initialised at step {}, below 0", s.index, step));
  if (!all_finite(values)) {
    throw Error(fmt::format("shard {}: initial values hold a NaN or an infinity", s.index));
  }
  if (!slots.empty() && slots.size() != slot_suffixes_.size()) {
    throw Error(fmt::format("shard {}: {} optimizer slots given, the optimizer keeps {}", s.index,
                            slots.size(), slot_suffixes_.size()));
  }
  for (std::span<const float> slot : slots) check_size(s.index, s.size, slot.size(), "a slot");
  bool first = false;
  {
    std::lock_guard lock(s.mutex);
    std::copy(values.begin(), values.end(), values_.begin() + s.offset);
    for (size_t k = 0; k < slot_suffixes_.size(); ++k) {
      float* dst = slots_.data() + k * local_values_ + s.offset;
      if (slots.empty()) {
        std::fill(dst, dst + s.size, s.optimizer->slot_initial_value(k));
      } else {
        std::copy(slots[k].begin(), slots[k].end(), dst);
      }
    }
    s.step = step;
    s.accumulated = 0;
    std::fill(s.contributed_step.begin(), s.contributed_step.end(), kNoStep);
    first = !s.initialized;
    s.initialized = true;
    s.step_advanced.notify_all();
  }
  if (!first) return;
  std::lock_guard lock(init_mutex_);
  ++initialized_count_;
  init_changed_.notify_all();
}

bool ShardStore::initialized() const {
  std::lock_guard lock(init_mutex_);
  return initialized_count_ == shards_.size();
}

bool ShardStore::wait_initialized(Deadline deadline) const {
  std::unique_lock lock(init_mutex_);
  init_changed_.wait_until(lock, deadline, [&] {
    return initialized_count_ == shards_.size() || finished_ || halting_;
  });
  return initialized_count_ == shards_.size();
}

int64_t ShardStore::read(size_t shard, std::span<float> out) const {
  const LocalShard& s = local(shard);
  check_size(s.index, s.size, out.size(), "a read");
  std::lock_guard lock(s.mutex);
  check_initialized(s.initialized, s.index, ps_);
  std::copy_n(values_.begin() + s.offset, s.size, out.begin());
  return s.step;
}

void ShardStore::read_to(size_t shard, void (*call)(const void*, std::span<const float>, int64_t),
                         const void* out) const {
  const LocalShard& s = local(shard);
  std::lock_guard lock(s.mutex);
  check_initialized(s.initialized, s.index, ps_);
  call(out, {values_.data() + s.offset, s.size}, s.step);
}

void ShardStore::read_slot(size_t shard, size_t k, std::span<float> out) const {
  const LocalShard& s = local(shard);
  if (k >= slot_suffixes_.size()) {
    throw Error(fmt::format("shard {}: no optimizer slot {} (the optimizer keeps {})", s.index, k,
                            slot_suffixes_.size()));
  }
  check_size(s.index, s.size, out.size(), "a slot read");
  std::lock_guard lock(s.mutex);
  check_initialized(s.initialized, s.index, ps_);
  std::copy_n(slots_.begin() + k * local_values_ + s.offset, s.size, out.begin());
}

PushResult ShardStore::push_async(size_t shard, int worker, uint64_t sequence,
                                  std::span<const float> grad, float lr) {
  LocalShard& s = local(shard);
  if (sync_replicas_)
    throw Error(fmt::format("shard {}: an async push to a ps task in sync mode", s.index));
  check_worker(s, worker);
  check_size(s.index, s.size, grad.size(), "a gradient");
  // Scanned before the lock is taken: the gradient is the caller's.
  const bool finite = finite_gradient(grad) && usable_learning_rate(lr);
  std::lock_guard lock(s.mutex);
  check_initialized(s.initialized, s.index, ps_);
  uint64_t& next = s.next_sequence[static_cast<size_t>(worker)];
  check_sequence(s, worker, sequence, next);
  if (sequence < next) {
    ++s.counters.duplicates;
    return {PushResult::Outcome::kDuplicate, s.step};
  }
  next = sequence + 1;
  if (!finite) {
    ++s.counters.rejected;
    return {PushResult::Outcome::kRejected, s.step};
  }
  apply(s, grad, lr);
  return {PushResult::Outcome::kApplied, s.step};
}

PushResult ShardStore::push_sync(size_t shard, int worker, uint64_t sequence,
                                 int64_t computed_at_step, std::span<const float> grad, float lr) {
  LocalShard& s = local(shard);
  if (!sync_replicas_)
    throw Error(fmt::format("shard {}: a sync push to a ps task in async mode", s.index));
  check_worker(s, worker);
  check_size(s.index, s.size, grad.size(), "a gradient");
  const size_t w = static_cast<size_t>(worker);
  float* sum = accumulator_.data() + s.offset;
  const bool finite = finite_gradient(grad) && usable_learning_rate(lr);
  std::lock_guard lock(s.mutex);
  check_initialized(s.initialized, s.index, ps_);
  check_sequence(s, worker, sequence, s.next_sequence[w]);
  // A retry of anything already answered — counted, stale or duplicate — changes nothing.
  if (sequence < s.next_sequence[w]) {
    ++s.counters.duplicates;
    return {PushResult::Outcome::kDuplicate, s.step};
  }
  s.next_sequence[w] = sequence + 1;
  if (!finite) {
    ++s.counters.rejected;
    return {PushResult::Outcome::kRejected, s.step};
  }
  if (computed_at_step != s.step) {
    ++s.counters.stale_dropped;
    return {PushResult::Outcome::kStale, s.step};
  }
  // At most one gradient per worker per step: unlike TensorFlow's token queue, a fast worker
  // cannot stand in for a slow one, so a step always averages R distinct replicas.
  if (s.contributed_step[w] == s.step) {
    ++s.counters.duplicates;
    return {PushResult::Outcome::kDuplicate, s.step};
  }
  s.contributed_step[w] = s.step;
  ++s.counters.accepted;
  // The step's first gradient is copied and the rest added, so the sum never needs clearing.
  if (s.accumulated == 0) {
    std::copy(grad.begin(), grad.end(), sum);
  } else {
    for (size_t i = 0; i < s.size; ++i) sum[i] += grad[i];
  }
  s.last_lr = lr;
  if (++s.accumulated < replicas_to_aggregate_) return {PushResult::Outcome::kAccepted, s.step};
  apply_step(s);
  return {PushResult::Outcome::kApplied, s.step};
}

// REQUIRES: s.mutex is held; s.accumulated > 0.
void ShardStore::apply_step(LocalShard& s) {
  float* sum = accumulator_.data() + s.offset;
  const float replicas = static_cast<float>(s.accumulated);
  for (size_t i = 0; i < s.size; ++i) sum[i] /= replicas;
  apply(s, {sum, s.size}, s.last_lr);
  s.accumulated = 0;
  s.advanced_at = std::chrono::steady_clock::now();
}

std::chrono::steady_clock::time_point ShardStore::advanced_at(size_t shard) const {
  const LocalShard& s = local(shard);
  std::lock_guard lock(s.mutex);
  return s.advanced_at;
}

void ShardStore::set_replicas(int r) {
  if (r < 1 || r > configured_replicas_) {
    throw Error(fmt::format("cannot make a step take {} gradients: 1..{} (--replicas_to_aggregate)",
                            r, configured_replicas_));
  }
  const int before = replicas_to_aggregate_.exchange(r);
  if (r >= before) return;  // a step short of r gradients waits for more
  for (size_t shard : shards_) {
    LocalShard& s = local(shard);
    std::lock_guard lock(s.mutex);
    if (s.accumulated >= r) apply_step(s);
  }
}

void ShardStore::note_workers(const WorkerCount& count) {
  std::lock_guard lock(workers_mutex_);
  workers_ = count;
  worker_changes_ = count.changes;
}

WorkerCount ShardStore::workers() const {
  std::lock_guard lock(workers_mutex_);
  return workers_;
}

void ShardStore::abort(std::string reason) {
  {
    std::lock_guard lock(abort_mutex_);
    if (!abort_reason_) abort_reason_ = std::move(reason);
  }
  finish();
}

std::optional<std::string> ShardStore::aborted() const {
  std::lock_guard lock(abort_mutex_);
  return abort_reason_;
}

std::optional<std::string> ShardStore::stalled_step(size_t shard, int64_t step, int report,
                                                    double waited) const {
  constexpr int64_t kStallReports = 64;
  const int64_t key = step * kStallReports + std::min<int64_t>(report, kStallReports - 1);
  int64_t said = stall_reported_.load();
  do {
    if (said >= key) return std::nullopt;  // another reply, waiting for the same step, said it
  } while (!stall_reported_.compare_exchange_weak(said, key));
  const LocalShard& s = local(shard);
  std::lock_guard lock(s.mutex);
  if (s.step != step) return std::nullopt;
  std::string missing;
  for (size_t w = 0; w < s.contributed_step.size(); ++w) {
    if (s.contributed_step[w] != step)
      missing += fmt::format("{}worker{}", missing.empty() ? "" : ", ", w);
  }
  return fmt::format(
      "step {} of shard {} has waited {:.1f} s for its gradients: {} of the {} it "
      "takes are in; none yet from {}",
      step, s.index, waited, s.accumulated, replicas_to_aggregate(),
      missing.empty() ? "any other worker" : missing);
}

int64_t ShardStore::wait_step_past(size_t shard, int64_t step, Deadline deadline) const {
  const LocalShard& s = local(shard);
  std::unique_lock lock(s.mutex);
  s.step_advanced.wait_until(lock, deadline,
                             [&] { return s.step > step || finished_ || halting_; });
  return s.step;
}

void ShardStore::finish() {
  finished_ = true;
  wake_initialization_waiters();
  for (size_t shard : shards_) {
    LocalShard& s = local(shard);
    // Taking the lock orders the flag before a waiter's predicate check, so no wake-up is lost.
    std::lock_guard lock(s.mutex);
    s.step_advanced.notify_all();
  }
}

bool ShardStore::finished() const { return finished_; }

void ShardStore::halt() {
  halting_ = true;
  wake_initialization_waiters();
  for (size_t shard : shards_) {
    LocalShard& s = local(shard);
    // As in finish(): under the lock, so that no waiter misses it.
    std::lock_guard lock(s.mutex);
    s.step_advanced.notify_all();
  }
}

bool ShardStore::halting() const { return halting_; }

void ShardStore::wake_initialization_waiters() {
  // Under the lock, so that a waiter between its check and its wait does not miss it.
  std::lock_guard lock(init_mutex_);
  init_changed_.notify_all();
}

uint64_t ShardStore::next_sequence(size_t shard, int worker) const {
  const LocalShard& s = local(shard);
  check_worker(s, worker);
  std::lock_guard lock(s.mutex);
  return s.next_sequence[static_cast<size_t>(worker)];
}

ShardCounters ShardStore::counters(size_t shard) const {
  const LocalShard& s = local(shard);
  std::lock_guard lock(s.mutex);
  ShardCounters counters = s.counters;
  counters.step = s.step;
  return counters;
}

int64_t ShardStore::reported_step() const {
  return shards_.empty() ? 0 : counters(shards_[0]).step;
}

}  // namespace dtrain
