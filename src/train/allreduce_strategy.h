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
#include "train/strategy.h"
#include "train/train_config.h"
#include "train/training_input.h"
#include "train/training_state.h"

namespace dtrain {

struct AllreduceClusterConfig {
  ClusterConfig cluster;  // the training workers (no ps tasks) and this task
  std::string secret;     // the cluster secret, raw bytes
  // 0: each step's gradients are one all-reduce over the whole gradient arena. Otherwise buckets
  // of at most this many bytes (whole tensors where they fit; a larger tensor alone, cut into
  // pieces of this size), each all-reduced in turn. Every worker must use the same value.
  size_t fusion_bytes = 0;
  // The largest message of a collective (CollectiveOptions::max_chunk_bytes).
  size_t chunk_bytes = 512 * 1024;
  // How long a worker waits for the ring to form and for any message once it has: a lost or
  // stuck worker fails every other within this time, with an error naming it.
  int collective_timeout_ms = 60'000;
  // A wait inside a collective reported past this (RingOptions::stall_warning_ms; 0: never).
  int stall_warning_ms = 3000;
  // How chunks reach a worker on the same host (--transport; comm/transport.h).
  Transport transport = Transport::kAuto;
  // An elastic job (--min_workers, issue 35): where its coordinator listens
  // (cluster/membership_service.h). Every ring then forms from the coordinator's view of who is
  // in the job, and re-forms at each change; nullopt: the cluster's workers, all of them, always.
  std::optional<HostPort> coordinator;
  // An elastic worker's name when it is not its task's: a worker that joins a running job alone
  // (dtrain task --join) is the only worker of its own cluster, and "worker<--task_index>" in the
  // job.
  std::string member_name;
  // An elastic job's --elastic_batch global: each step takes the job's global batch (its --workers
  // × --batch_size examples), split over the workers there are; false: every worker takes
  // --batch_size, and the global batch follows their number.
  bool keep_global_batch = false;
};

// A default-constructed config, for the flags that show its defaults: one instance rather than a
// temporary per use.
const AllreduceClusterConfig& default_allreduce_cluster_config();

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
    bucket_seconds_ = std::move(observers.collective);
    worker_times_ = std::move(observers.workers);
  }
  LogExtras log_extras() override;
  Closing closing(const RunFigures& figures) const override;

 private:
  std::string describe() const;
  // A 12-byte all-reduce a step (about 10 us on loopback): which of the signals reached any rank.
  int agree_to_halt(int own_signal);
  // The workers of the ring: the cluster's, or an elastic job's current view's once it has one.
  int size() const {
    return elastic() && view_.id > 0 ? view_.size() : static_cast<int>(workers_.size());
  }
  bool chief() const { return rank_ == 0; }
  int workers_on_host(const std::string& host) const;
  std::string rank_prefix() const;
  std::string name() const;
  std::string name_of(int rank) const;
  void print_links();
  void print_start_line(const TrainingState& state);
  void share_state(TrainingState& state, int root = 0);
  // The ring over the cluster's workers, all of them (not elastic).
  void listen_on_cluster_ring();
  RingOptions ring_options(int size, int rank, const HostPort& right) const;
  void halt_vote(int own_signal);
  int leave(int signal);  // an elastic worker's clean leave; returns the signal

  // ---- elastic jobs (allreduce_elastic.cc) ----
  bool elastic() const { return membership_ != nullptr; }
  // This worker's view of the job: waits for the coordinator's next view, forms its ring and takes
  // the state of the member furthest along (a fresh job's rank 0 initialises or restores first).
  // Forms again if a member is lost meanwhile. `have_state`: this worker's state is the job's at
  // state.step (false for a worker that has not trained yet).
  void join_view(TrainingState& state, bool have_state);
  // After the ring failed or was interrupted by a change: the step under way is dropped here, and
  // every member ends with the state of the member furthest along (docs/elastic.md).
  void reform(TrainingState& state, const std::string& why);
  void print_changes(const MembershipView& view, const MembershipView& before);
  // Where a job that starts or resumes at `step` stands in its data, with the cluster's workers.
  DataPosition position_at(int64_t step) const;
  // The examples of a step over all workers now.
  int64_t global_batch() const;

  const TrainConfig& c_;
  const AllreduceClusterConfig& config_;
  std::ostream& out_;
  int rank_;
  std::vector<TaskId> workers_;            // in rank order (an elastic job: the current view's)
  std::vector<std::span<float>> buckets_;  // views of the state's gradient arena
  static constexpr std::array<int, 3> kHaltSignals = {SIGTERM, SIGHUP, SIGINT};
  // Each step's halt vote: one count per signal, then every rank's own time of the step (seconds
  // outside the collectives; zero from the others), which the sum makes known to every rank.
  std::vector<float> halt_votes_;
  std::chrono::steady_clock::time_point own_since_;  // the end of the last collective
  float own_seconds_ = 0;                            // this worker's, in the step just made
  StragglerWatch stragglers_{"its own part of a step (outside the collectives)"};  // the chief's
  std::function<void(int, size_t, double)> bucket_seconds_;
  std::function<void(const WorkerTimes&)> worker_times_;  // the chief's, after each step
  uint64_t fingerprint_ = 0;
  int64_t total_steps_ = 0;
  std::unique_ptr<RingConnector> connector_;    // until start() has joined the ring
  std::unique_ptr<RingLinks> ring_;             // from start()
  std::unique_ptr<Communicator> communicator_;  // over ring_
  int64_t skipped_steps_ = 0;  // updates skipped for a non-finite averaged gradient
  uint32_t params_crc_ = 0;

  // Elastic jobs.
  TrainingState& state_;
  Restore restore_;                             // from start(), for a fresh view's rank 0
  MembershipClientOptions membership_options_;  // to join again once dropped
  std::unique_ptr<MembershipClient> membership_;
  MembershipView view_;
  DataPosition position_;  // where the next global batch starts
  int64_t train_examples_ = 0;
  int planned_workers_ = 0;  // the job's --workers, by which its steps are counted
  int member_index() const;  // the number in this worker's name
  bool place_changed_ = false;
  bool leaving_ = false;
  bool skip_vote_ = false;  // the step re-formed the ring: the next halt vote is left out
  int64_t left_ = 0;        // workers that left or were lost during the run
  int64_t joined_ = 0;      // workers that joined it after the first view
  int64_t views_ = 0;       // views this worker formed its ring from
  std::vector<std::pair<int64_t, double>> worker_counts_;  // not yet taken
};

}  // namespace dtrain
