// The allreduce strategy (DESIGN.md §2 and §6): every worker is equal, holds a full replica of the
// parameters and the optimizer state, and after each step's averaged gradient is applied on every
// replica, all replicas hold bitwise identical parameters. It sees its ring only through a
// RingConnector, so the same workers run as processes over TCP or as threads over a MemoryRing.
#pragma once

#include <array>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/cluster_spec.h"
#include "cluster/membership_client.h"
#include "collective/communicator.h"
#include "collective/ring_connector.h"
#include "comm/transport.h"
#include "metrics/straggler_watch.h"
#include "train/allreduce_cluster_config.h"
#include "train/allreduce_ring.h"
#include "train/fusion_buckets.h"
#include "train/global_batches.h"
#include "train/ring_step_vote.h"
#include "train/strategy.h"
#include "train/train_config.h"
#include "train/training_input.h"
#include "train/training_state.h"

namespace dtrain {

// What every worker of the ring must agree on, which the ring's fingerprint hashes: what a
// checkpoint records of the run (train_config_json: every setting that changes what training
// computes, so a setting recorded there is agreed without a line here), less what is each worker's
// own (where its files lie, its towers), plus what only the ring needs: the parameters' layout,
// the optimizer's constants, the sequence and lengths of the collectives (steps, evaluations that
// may stop the run, buckets, chunks) and the training examples themselves.
nlohmann::json agreed_settings(const TrainConfig& c, const AllreduceClusterConfig& config,
                               const Model& model, const ParamSet& layout,
                               const TrainingInput& input, int64_t total_steps);

// One worker of the ring: a step is compute (on this worker's slice of the global batch), then one
// average all-reduce per fusion bucket of the gradient arena, then the optimizer applied locally.
// Rank 0 alone initialises or restores, broadcasts the whole training state before the first
// step, and decides when a target accuracy ends the run, so every rank runs the same sequence of
// collectives and holds the same parameters.
class AllreduceStrategy final : public Strategy {
 public:
  // Listens for its left neighbour through `connector` (printing where, unless the ranks share
  // this process); start() joins the ring.
  // REQUIRES: config.cluster.task is a training worker; train, config, input and out outlive it.
  AllreduceStrategy(const TrainConfig& train, const AllreduceClusterConfig& config,
                    TrainingState& state, const TrainingInput& input,
                    std::unique_ptr<RingConnector> connector, std::ostream& out);
  ~AllreduceStrategy() override;

  // The others would otherwise learn of a failure only from the broken connections, or from the
  // timeout if this process lingered. A ring that failed by itself keeps its own message.
  void abort(std::string_view why);

  WorkerPlace place() const override;
  StrategyTraits traits(int batch_size) const override;
  std::optional<DataSlice> data_slice() const override;
  int64_t start(TrainingState& state, const Restore& restore) override;
  StepReport exchange_and_apply(TrainingState& state, const StepContext& context) override;
  StepBoundary after_step(int own_signal) override;
  StopVerdict agree_to_stop(StopVerdict verdict) override;
  void finish(TrainingState& state, bool reached_end) override;
  void observe(StrategyObservers observers) override {
    buckets_.observe(std::move(observers.collective));
    vote_.observe(std::move(observers.workers));
  }
  LogExtras log_extras() override;
  Closing closing(const RunFigures& figures) const override;

 private:
  // A 12-byte all-reduce a step (about 10 us on loopback): which of the signals reached any rank.
  int agree_to_halt(int own_signal);
  int size() const { return ring_.size(); }
  bool chief() const { return ring_.chief(); }
  std::string name() const { return ring_.name(); }
  int leave(int signal);  // an elastic worker's clean leave; returns the signal

  // ---- elastic jobs (allreduce_elastic.cc) ----
  bool elastic() const { return ring_.elastic(); }
  // This worker's view of the job: waits for the coordinator's next view, forms its ring and takes
  // the state of the member furthest along (a fresh job's rank 0 initialises or restores first).
  // Forms again if a member is lost meanwhile. `have_state`: this worker's state is the job's at
  // state.step (false for a worker that has not trained yet).
  void join_view(TrainingState& state, bool have_state);
  // After the ring failed or was interrupted by a change: the step under way is dropped here, and
  // every member ends with the state of the member furthest along (docs/elastic.md).
  void reform(TrainingState& state, const std::string& why);

  const TrainConfig& c_;
  const AllreduceClusterConfig& config_;
  std::ostream& out_;
  AllreduceRing ring_;
  GradientBuckets buckets_;         // of the state's gradient arena
  GlobalBatches batches_;           // where the job stands in its data
  RingStepVote vote_{ring_, out_};  // after each step
  uint64_t fingerprint_ = 0;
  int64_t total_steps_ = 0;
  int64_t skipped_steps_ = 0;  // updates skipped for a non-finite averaged gradient
  uint32_t params_crc_ = 0;

  // Elastic jobs.
  TrainingState& state_;
  Restore restore_;  // from start(), for a fresh view's rank 0
  bool place_changed_ = false;
  bool leaving_ = false;
  bool skip_vote_ = false;  // the step re-formed the ring: the next halt vote is left out
};

}  // namespace dtrain
