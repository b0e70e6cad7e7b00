// One worker of the ps strategies as the training loop's Strategy (train/strategy.h), over a
// PsClient to every ps task of the cluster.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "cluster/membership.h"
#include "ps/partition.h"
#include "ps/ps_client.h"
#include "ps/ps_protocol.h"
#include "ps/worker_pace.h"
#include "train/ps_cluster_config.h"
#include "train/strategy.h"
#include "train/train_config.h"
#include "train/training_state.h"

namespace dtrain {

// One worker of the ps strategies (`async`, `sync`; DESIGN.md §5) as the training loop's Strategy.
// A step is compute (on this worker's slice of the global batch) then one push-pull, which sends
// the gradient shard by shard and receives each shard's values after the update in the same round
// trip; the step's learning rate comes from the global step, so every worker follows one schedule.
// The chief initialises (or restores) the ps tasks and checkpoints what they hold; the others wait
// for it.
class PsStrategy final : public Strategy {
 public:
  // REQUIRES: train and config outlive the strategy; config.cluster.task is a training worker.
  PsStrategy(const TrainConfig& train, const PsClusterConfig& config, const TrainingState& state,
             std::ostream& out);

  // A worker that joined a running async job beyond its --workers takes a shard of theirs.
  WorkerPlace place() const override {
    return {.rank = rank_ % workers_,
            .workers = workers_,
            .chief = chief_,
            .distributed = true,
            .id = rank_ >= workers_ ? rank_ : -1};
  }
  // Async: every worker's batch is a global step. Sync: one global step takes a batch from each
  // worker.
  StrategyTraits traits(int batch_size) const override;

  int64_t start(TrainingState& state, const Restore& restore) override;

  // One push-pull. The gradient stays in state.grads(): it is what this worker pushed.
  StepReport exchange_and_apply(TrainingState& state, const StepContext& context) override;

  bool finished() const override { return client_->finished(); }

  // The ps tasks still reachable learn that this worker ends with an error.
  void report_failure(const std::string& why);

  // The chief's own verdict: the others learn of it from the ps tasks, which the chief tells at
  // its finish that training is over (a sync step would otherwise wait for it for ever).
  StopVerdict agree_to_stop(StopVerdict verdict) override { return verdict; }

  void before_checkpoint(TrainingState& state) override;

  // The last values (and, for the chief's checkpoint, slots) before saying done: the ps tasks exit
  // once every worker has. Telling them at once matters for a chief that stopped at its target:
  // the others stop when the ps tasks pass the word on, at their next push.
  // The ps tasks stopping (a signal of theirs) stop this worker too, as SIGTERM would.
  StepBoundary after_step(int own_signal) override;

  void finish(TrainingState& state, bool reached_end) override;

  // The chief's: one round trip to every ps task per step line.
  LogExtras log_extras() override;
  void observe(StrategyObservers observers) override {
    worker_times_ = std::move(observers.workers);
  }

  Closing closing(const RunFigures& f) const override;

 private:
  std::string name() const;
  std::string describe() const;

  void print_start_line(const TrainingState& state);

  // Returns whether the state came from a checkpoint.
  bool initialize_or_restore(TrainingState& state, const Restore& restore);

  // A gradient with a NaN or an infinity is held back whole: the ps tasks would reject only the
  // shards that hold one and apply the rest, a partial update (and, in sync mode, a worker that
  // counts towards a step on some shards but not on others). The ps tasks reject any that arrives
  // all the same, from a worker that does not check; both are counted and reported. Sync: the
  // next gradient is still computed at this step, so it takes this one's place.
  void push_pull_if_finite(TrainingState& state, const StepContext& context);
  // A sync job with --min_workers, or an async one that takes joiners: the line of each change
  // of its workers that ps0 reported.
  void print_worker_changes();
  bool counts_workers() const {
    return config_.min_workers > 0 || config_.max_workers > 0 || config_.joined_as >= 0;
  }

  const TrainConfig& c_;
  const PsClusterConfig& config_;
  std::ostream& out_;
  const SyncOptions sync_;
  const int rank_;
  const int workers_;
  const bool chief_;
  PartitionMap map_;
  std::optional<PsClient> client_;
  ps_protocol::DoneReply done_;
  int64_t stale_rounds_ = 0;
  int64_t nonfinite_rounds_ = 0;  // gradients held back, or rejected by a ps
  uint32_t params_crc_ = 0;       // of the values pulled at the end
  WorkerCount workers_seen_;      // ps0's newest word on the workers, as printed
  bool leaving_ = false;          // a SIGTERM made this worker leave an elastic job
  Membership membership_;         // as ps0 counts it (a sync job's workers, an async one's joiners)
  // ps0's totals of each worker's steps at the chief's last progress line.
  std::vector<WorkerPace::Totals> paces_seen_;
  std::function<void(const WorkerTimes&)> worker_times_;  // the chief's, at each step line
};

}  // namespace dtrain
