// The owner of a run in this process (Python's fit and its Keras callbacks) watching the chief's
// step boundaries and steering the run from them — a new learning rate, a stop — and the orders
// it gives, made every worker's at the same step (RunControl). Keras's callback protocol, on the
// engine's side: the owner runs its callbacks, the loop only reports and obeys.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/checkpoint.h"

namespace dtrain {

// A boundary of the chief's loop, as Keras's callbacks see one.
struct RunEvent {
  enum class Kind { kTrainBegin, kEpochBegin, kBatchBegin, kBatchEnd, kEpochEnd };
  Kind kind = Kind::kTrainBegin;
  int64_t epoch = 0;  // from 0
  int64_t batch = 0;  // the batch's index in its epoch, from 0 (batch events)
  int64_t step = 0;   // the global step: before the batch (begin events), after it (end events)
  float learning_rate = 0;         // of the next step, as the run stands
  double examples_per_second = 0;  // an epoch's end: the epoch's training throughput
  // Keras's logs: "loss" (at a batch's end the mean of the epoch's batches so far, at an epoch's
  // end of all of them), and "val_loss", "val_accuracy" where the epoch ended in a validation.
  std::vector<std::pair<std::string, double>> logs = {};
};

// What the owner decides at an event. Both take effect before the next step.
struct RunOrders {
  std::optional<float> learning_rate =
      std::nullopt;   // from the next step on, instead of the schedule's
  bool stop = false;  // the run ends there, as at its last step (Keras's model.stop_training)
};

// The chief's state as a checkpoint holds it, made on the chief's thread when asked.
using RunWeights = std::function<Checkpoint()>;

class RunOwner {
 public:
  virtual ~RunOwner() = default;
  // Whether the batch events are wanted: each costs a hand-over between threads per step, and
  // every worker then waits at every step for the chief's orders.
  virtual bool wants_batches() const = 0;
  // Called on the chief's thread, which waits for the answer. `weights` may be called (from
  // another thread too) until on_event returns, and runs on the chief's thread: the owner's
  // callbacks read the weights as they stand at this boundary.
  virtual RunOrders on_event(const RunEvent& event, const RunWeights& weights) = 0;
};

// One run's orders, shared by the workers of a run in this process (plan/in_process_run.h): the
// chief posts what its owner decided before each of its steps, and every other worker takes the
// orders in force at the same global step. Thread-safe.
class RunControl {
 public:
  // lockstep: every worker runs every global step (all-reduce, sync ps), so a worker waits for
  // the chief's orders before a step where they may change; otherwise (async ps, whose global
  // step is no worker's own) a worker takes the latest orders without waiting.
  RunControl(RunOwner& owner, bool lockstep) : owner_(owner), lockstep_(lockstep) {}
  RunControl(const RunControl&) = delete;
  RunControl& operator=(const RunControl&) = delete;

  RunOwner& owner() { return owner_; }
  bool lockstep() const { return lockstep_; }

  // The chief: the orders in force from global step `step` on.
  void post(int64_t step, const RunOrders& orders);
  // Any other worker: the orders in force at `step` — once the chief has posted that step, where
  // the run is lockstep. After close(), a step the chief never posted is a stop.
  RunOrders orders_at(int64_t step);
  // The chief's loop has ended, or failed: nothing more is posted, and nobody waits for it.
  void close();

 private:
  RunOwner& owner_;
  const bool lockstep_;
  std::mutex mutex_;
  std::condition_variable posted_;
  int64_t last_posted_ = -1;                             // GUARDED_BY(mutex_)
  std::vector<std::pair<int64_t, float>> rate_changes_;  // (from step, rate), in step order
  std::optional<int64_t> stop_at_;                       // GUARDED_BY(mutex_)
  bool closed_ = false;                                  // GUARDED_BY(mutex_)
};

}  // namespace dtrain
