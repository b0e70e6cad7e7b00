// The allreduce strategy (DESIGN.md §2 and §6): every worker is equal, holds a full replica of the
// parameters and the optimizer state, and after each step's averaged gradient is applied on every
// replica, all replicas hold bitwise identical parameters. It sees its ring only through a
// RingConnector, so the same workers run as processes over TCP or as threads over a MemoryRing.
#pragma once

#include <array>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/cluster_spec.h"
#include "collective/communicator.h"
#include "collective/ring_connector.h"
#include "comm/transport.h"
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
  // How chunks reach a worker on the same host (--transport; comm/transport.h).
  Transport transport = Transport::kAuto;
};

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
  std::string describe() const override;
  int64_t start(TrainingState& state, const Restore& restore) override;
  float step(TrainingState& state, GradientComputer& computer, const Batch& batch, float lr,
             int64_t local_step, bool keep_gradient) override;
  StopVerdict agree_to_stop(StopVerdict verdict) override;
  int agree_to_halt(int own_signal) override;
  std::string counters() const override;
  void print_summary(std::ostream& out, const RunFigures& figures) const override;
  void finish(TrainingState& state, bool reached_end) override;

 private:
  int size() const { return static_cast<int>(workers_.size()); }
  bool chief() const { return rank_ == 0; }
  int workers_on_host(const std::string& host) const;
  std::string rank_prefix() const;
  std::string name() const;
  std::string name_of(int rank) const;
  void print_links();
  void print_start_line(const TrainingState& state);
  void share_state(TrainingState& state);

  const TrainConfig& c_;
  const AllreduceClusterConfig& config_;
  std::ostream& out_;
  const int rank_;
  const std::vector<TaskId> workers_;      // in rank order
  std::vector<std::span<float>> buckets_;  // views of the state's gradient arena
  static constexpr std::array<int, 3> kHaltSignals = {SIGTERM, SIGHUP, SIGINT};
  std::array<float, kHaltSignals.size()> halt_votes_{};
  uint64_t fingerprint_ = 0;
  int64_t total_steps_ = 0;
  std::unique_ptr<RingConnector> connector_;    // until start() has joined the ring
  std::unique_ptr<RingLinks> ring_;             // from start()
  std::unique_ptr<Communicator> communicator_;  // over ring_
  int64_t skipped_steps_ = 0;  // updates skipped for a non-finite averaged gradient
  uint32_t params_crc_ = 0;
};

}  // namespace dtrain
