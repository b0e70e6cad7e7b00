// What differs between the training strategies (DESIGN.md §2a): how a step's gradients become new
// parameters, who initialises or restores, how the workers agree to stop, and what each reports
// at the end. Everything else — data, schedule, the step's compute, fault injection, the
// non-finite guard, the step's timing, moving average, evaluation cadence, target accuracy, step
// lines, the run log, checkpoints — lives once, in the training loop (train/training_loop.h),
// which drives a Strategy through these calls in this order:
//   start → (compute, exchange_and_apply, after_step, then at the loop's cadence agree_to_stop /
//   before_checkpoint)* → finish.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/batch_source.h"
#include "train/step_compute.h"
#include "train/training_state.h"

namespace dtrain {

struct WorkerTimes;  // metrics/run_board.h

// Where this process stands among the workers of its run.
struct WorkerPlace {
  int rank = 0;
  int workers = 1;
  bool chief = true;  // initialises, evaluates during the run, checkpoints, writes the run log
  bool distributed = false;  // one worker of several processes: lines say "worker=<rank>"
  // The number lines and files name the worker by when it is not its rank: an elastic job's
  // worker keeps its task's number while its rank follows the membership. -1: its rank.
  int id = -1;
  int name_index() const { return id >= 0 ? id : rank; }
};

// Which slice of which global batch a worker of an elastic job trains on next (issue 35): its rank
// among the workers of the job's current membership, their number, and where in the data the next
// global batch starts.
struct DataSlice {
  int index = 0;
  int count = 1;
  DataPosition at;
  int64_t global_batch = 0;  // the examples of a step, over all `count` slices
};

// The figures of a finished run, for the strategy's closing lines.
struct RunFigures {
  int64_t first_step = 0;  // the global step the run started (or resumed) at
  int64_t last_step = 0;
  int64_t local_steps = 0;  // steps this worker ran
  double train_seconds = 0;
  int batch_size = 0;  // per worker
  double test_accuracy = 0;
};

// The chief's judgement of an evaluation of the validation set: whether the run stops (at its
// target accuracy, or early: --early_stopping_patience evaluations without a lower loss), and
// whether these weights are the best so far (the lowest validation loss, under early stopping).
struct StopVerdict {
  bool stop = false;
  double accuracy = 0;  // of the validation set
  double loss = 0;      // of the validation set
  bool early = false;   // stop: for want of improvement, not at the target
  bool improved = false;
};

// The time of a step's phases, for the metrics endpoint (dtrain_step_seconds by phase): computing
// the gradients (the loop's), then the strategy's StepReport. A negative time: not a phase.
struct StepPhases {
  double compute = -1;
  double communicate = -1;
  double apply = -1;
};

// What a strategy is, for the loop: fixed for the run, asked once.
struct StrategyTraits {
  // The strategy and its cluster, for the start-up table ("allreduce, 2 workers").
  std::string description = {};
  // Global steps one of this worker's batches makes (an async ps job: one per worker's push).
  int64_t steps_per_batch = 1;
  // The most examples one of this worker's batches ever holds: more than --batch_size where an
  // elastic job keeps its global batch over fewer workers.
  int largest_batch = 0;
  // No exchange stands between the gradients and their update (the local strategies): the
  // loop's compute may make the update itself, as the gradients come (StepContext::may_update).
  bool update_in_compute = false;
  // The strategy's own compute; null: the loop's gradient computer. Outlives the run.
  StepCompute* compute = nullptr;
};

// What the step just made changed (Strategy::after_step).
struct StepBoundary {
  // The signal that stops the run here (0: go on). Under all-reduce every worker's answer is the
  // same, so all stop at the same step; a ps worker also stops when its ps tasks are stopping.
  int halt_signal = 0;
  // The halt is this worker's leave of a job that goes on without it (an elastic worker's
  // SIGTERM), not the run's.
  bool left_job = false;
  // place() changed (a membership change moved this worker to another rank, or made it the
  // chief).
  bool place_changed = false;
  // Elastic jobs: the number of workers at each membership change since the last step, with the
  // global step it took effect at, for the chief's run log (the scalar "workers").
  std::vector<std::pair<int64_t, double>> worker_counts = {};
};

// What the chief adds at each step line: the ps tasks' counts of stale, duplicate and non-finite
// gradients so far (the run log's scalars), and what it knows of every worker's steps (lines after
// the step line).
struct LogExtras {
  std::vector<std::pair<std::string, double>> scalars = {};
  std::vector<std::string> lines = {};
};

// What a strategy adds to the closing lines.
struct Closing {
  std::string counters = {};  // after the throughput ("3 rounds with a stale gradient, ...")
  std::vector<std::string> lines =
      {};  // after the closing line (the chief's aggregate, a checksum)
};

// Where a strategy's live figures go, from the next step on (the metrics endpoint's).
struct StrategyObservers {
  // Each collective of a step's gradients (an all-reduce bucket): its number, bytes and time.
  std::function<void(int bucket, size_t bytes, double seconds)> collective = {};
  // The chief's news of every worker's steps: their own step times and the stragglers it names
  // (the live page's, metrics/run_board.h).
  std::function<void(const WorkerTimes&)> workers = {};
};

// Restores the newest valid checkpoint of --train_dir into the state, if there is one, and
// returns its global step; nullopt when there is none (or no --train_dir).
using Restore = std::function<std::optional<int64_t>()>;

class Strategy {
 public:
  virtual ~Strategy() = default;

  virtual WorkerPlace place() const = 0;
  // REQUIRES: batch_size is the run's --batch_size.
  virtual StrategyTraits traits(int batch_size) const = 0;
  // Elastic jobs: the slice of data this worker's next step takes, which follows the membership;
  // nullopt where the slices are fixed for the run (BatchSource::seek says where it resumes).
  virtual std::optional<DataSlice> data_slice() const { return std::nullopt; }

  // Brings the state to its first step — initialised or restored by whoever does that under this
  // strategy, and the same on every replica — and returns that global step.
  virtual int64_t start(TrainingState& state, const Restore& restore) = 0;
  // The second half of a step, after its compute: the gradients in state.grads() (unless the
  // compute made the update, context.updated) become new parameters, and state.step the new
  // global step.
  virtual StepReport exchange_and_apply(TrainingState& state, const StepContext& context) = 0;
  // After every step, given this process's own signal (0 if none came): what the step changed.
  virtual StepBoundary after_step(int own_signal) { return {.halt_signal = own_signal}; }
  // The run is over for every worker by another's doing (a ps worker saw the last step, or the
  // chief stopped at its target).
  virtual bool finished() const { return false; }
  // The chief's verdict after an evaluation (the others pass an empty one), made everyone's.
  // Every worker calls it at the same global steps, and only when a target accuracy or early
  // stopping is set. A worker that hears `improved` keeps its weights as the best.
  virtual StopVerdict agree_to_stop(StopVerdict chief_verdict) { return chief_verdict; }
  // Before the chief checkpoints: brings the state's tensors up to date (the ps hold them).
  virtual void before_checkpoint(TrainingState& /*state*/) {}
  // This worker is done (reached_end: the last step or the target, for everyone; else it was
  // stopped by a signal): brings the state up to date — on the chief, everything a checkpoint
  // holds — and tells the peers. The loop then writes the last checkpoint and, unless stopped,
  // evaluates from exactly this state.
  virtual void finish(TrainingState& /*state*/, bool /*reached_end*/) {}

  virtual void observe(StrategyObservers /*observers*/) {}
  virtual LogExtras log_extras() { return {}; }
  virtual Closing closing(const RunFigures& /*figures*/) const { return {}; }
};

}  // namespace dtrain
