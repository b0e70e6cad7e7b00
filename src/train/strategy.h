// What differs between the training strategies (DESIGN.md §2a): how a step's gradients become new
// parameters, who initialises or restores, how the workers agree to stop, and what each reports
// at the end. Everything else — data, schedule, moving average, evaluation cadence, target
// accuracy, step lines, the run log, checkpoints — lives once, in the training loop
// (train/training_loop.h), which drives a Strategy through these calls in this order:
//   start → (step, then at the loop's cadence agree_to_stop / before_checkpoint)* → finish.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "data/batch_source.h"
#include "train/gradient_computer.h"
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
// the gradients, exchanging them (all-reduce; push and pull), and the optimizer's update where
// this worker makes it. A negative time: not a phase of this strategy.
struct StepPhases {
  double compute = -1;
  double communicate = -1;
  double apply = -1;
};

// Restores the newest valid checkpoint of --train_dir into the state, if there is one, and
// returns its global step; nullopt when there is none (or no --train_dir).
using Restore = std::function<std::optional<int64_t>()>;

class Strategy {
 public:
  virtual ~Strategy() = default;

  virtual WorkerPlace place() const = 0;
  // The strategy and its cluster, for the start-up table ("allreduce, 2 workers").
  virtual std::string describe() const = 0;
  // Global steps in one epoch of the training data, given this worker's batches per epoch.
  virtual int64_t global_steps_per_epoch(int64_t batches_per_epoch) const {
    return batches_per_epoch;
  }
  // Which of this worker's batches it trains on at global step `step`: where a resumed run picks
  // up the data.
  virtual int64_t batch_index_at(int64_t step) const { return step; }

  // Brings the state to its first step — initialised or restored by whoever does that under this
  // strategy, and the same on every replica — and returns that global step.
  virtual int64_t start(TrainingState& state, const Restore& restore) = 0;
  // One step on this worker's batch at learning rate lr: the gradients at the state's parameters
  // become new parameters, and state.step the new global step. local_step counts this worker's
  // steps from 1. keep_gradient: state.grads() must hold the step's gradient afterwards, as this
  // worker's update used it (averaged over the batch, the towers and, under all-reduce, the
  // workers), for the run log's histograms. Returns the loss of the batch.
  virtual float step(TrainingState& state, GradientComputer& computer, const Batch& batch, float lr,
                     int64_t local_step, bool keep_gradient) = 0;
  // The run is over for every worker by another's doing (a ps worker saw the last step, or the
  // chief stopped at its target).
  virtual bool finished() const { return false; }
  // Elastic jobs: the slice of data this worker's next step takes, which follows the membership;
  // nullopt where the slices are fixed for the run (BatchSource::seek says where it resumes).
  virtual std::optional<DataSlice> data_slice() const { return std::nullopt; }
  // The most examples one of this worker's batches ever holds, for a worker batch of
  // `batch_size`: more where an elastic job keeps its global batch over fewer workers.
  virtual int largest_batch(int batch_size) const { return batch_size; }
  // Elastic jobs: the number of workers at each membership change since the last call, with the
  // global step it took effect at, for the chief's run log (the scalar "workers").
  virtual std::vector<std::pair<int64_t, double>> take_worker_counts() { return {}; }
  // Whether place() has changed since the last call (a membership change moved this worker to
  // another rank, or made it the chief).
  virtual bool take_place_change() { return false; }
  // This worker left a job that goes on without it (an elastic worker's SIGTERM): its halt is
  // not the run's.
  virtual bool left_job() const { return false; }
  // The chief's verdict after an evaluation (the others pass an empty one), made everyone's.
  // Every worker calls it at the same global steps, and only when a target accuracy or early
  // stopping is set. A worker that hears `improved` keeps its weights as the best.
  virtual StopVerdict agree_to_stop(StopVerdict chief_verdict) { return chief_verdict; }
  // After every step: the signal that stops the run here (0: go on), given this process's own
  // (0 if none came). Under all-reduce every worker's answer is the same, so all stop at the same
  // step; a ps worker also stops when its ps tasks are stopping.
  virtual int agree_to_halt(int own_signal) { return own_signal; }
  // Before the chief checkpoints: brings the state's tensors up to date (the ps hold them).
  virtual void before_checkpoint(TrainingState& /*state*/) {}
  // This worker is done (reached_end: the last step or the target, for everyone; else it was
  // stopped by a signal): brings the state up to date — on the chief, everything a checkpoint
  // holds — and tells the peers. The loop then writes the last checkpoint and, unless stopped,
  // evaluates from exactly this state.
  virtual void finish(TrainingState& /*state*/, bool /*reached_end*/) {}
  // Scalars the chief adds to the run log at each step line: the ps tasks' counts of stale,
  // duplicate and non-finite gradients so far.
  virtual std::vector<std::pair<std::string, double>> run_scalars() { return {}; }
  // Each collective of a step's gradients (an all-reduce bucket) is timed and given to
  // `observe` with its bucket's number and bytes, from the next step on (the metrics endpoint's).
  virtual void time_collectives(std::function<void(int bucket, size_t bytes, double seconds)>) {}
  // The phases of the last step() (the loop times the whole step itself).
  virtual StepPhases last_phases() const { return {}; }
  // Lines the chief adds after each step line: what it knows of every worker's steps.
  virtual std::vector<std::string> progress_lines() { return {}; }
  // The chief hands `observe` what it learns of every worker's steps, when it learns it: their
  // own step times and the stragglers it names (the live page's, metrics/run_board.h).
  virtual void watch_workers(std::function<void(const WorkerTimes&)> /*observe*/) {}
  // What the closing line adds after the throughput ("3 rounds with a stale gradient, ...").
  virtual std::string counters() const { return ""; }
  // Lines after the closing line (the chief's aggregate, a replica's checksum).
  virtual void print_summary(std::ostream& /*out*/, const RunFigures& /*figures*/) const {}
};

}  // namespace dtrain
