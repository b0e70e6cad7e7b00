// The ring an all-reduce worker trains over: the cluster's workers, all of them for the whole run,
// or — an elastic job (docs/elastic.md) — each membership view the job's coordinator settles,
// formed again at every change. It names the ranks, says which way each link travels, and counts
// the views and the changes between them; what travels over it is the strategy's
// (train/allreduce_strategy.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "cluster/cluster_spec.h"
#include "cluster/membership.h"
#include "cluster/membership_client.h"
#include "collective/communicator.h"
#include "collective/ring_connector.h"
#include "data/batch_source.h"
#include "train/allreduce_cluster_config.h"
#include "train/train_config.h"
#include "train/training_state.h"

namespace dtrain {

class AllreduceRing {
 public:
  // An elastic job's worker (config.coordinator) joins its coordinator here, admitted on
  // `settings`; the others form the cluster's ring through `connector`.
  // REQUIRES: train, config and out outlive this.
  AllreduceRing(const TrainConfig& train, const AllreduceClusterConfig& config,
                std::unique_ptr<RingConnector> connector, nlohmann::json settings,
                std::ostream& out);
  ~AllreduceRing();

  bool elastic() const { return membership_ != nullptr; }
  // This worker's rank and the workers of the ring: the cluster's, or the current view's once
  // an elastic job has one.
  int rank() const { return rank_; }
  int size() const;
  bool chief() const { return rank_ == 0; }
  // The job's --workers, by which its steps are counted (a worker that joins later was started
  // alone), and the fewest it goes on with.
  int planned_workers() const { return planned_workers_; }
  int fewest_workers() const;
  // Before the first view: a worker that joins a running job alone.
  bool before_first_view() const { return elastic() && view_.id == 0; }
  // This worker's name ("worker1"; an elastic worker keeps its task's whatever its rank), a
  // rank's, and the number in this worker's.
  std::string name() const;
  std::string name_of(int rank) const;
  int member_index() const;
  // "allreduce, 2 workers", for the start-up table.
  std::string describe() const;

  // What every member must agree on, which the ring's handshake compares. The cluster's ring then
  // listens, saying where (unless the ranks share this process).
  void agree_on(uint64_t fingerprint);
  // The cluster's ring, formed.
  void connect();
  // An elastic job: the coordinator's next view with its ring formed, then formed(view,
  // have_state), which takes the state over it and may throw CollectiveError: the ring of the
  // next view is formed then. have_state: this worker's state is the job's at `step` (false for
  // one that has not trained yet, or was dropped from the job); formed may clear it.
  using Formed = std::function<void(const MembershipView& view, bool& have_state)>;
  void join(int64_t step, bool have_state, const Formed& formed);

  Communicator& communicator() { return *communicator_; }
  // An elastic job's coordinator changed the view since this ring formed (a view of one member
  // has no ring for it to interrupt).
  bool interrupted() const;
  std::string interrupt_why() const;
  // Tells the coordinator this worker leaves at `step` (finished: with the job's end).
  void leave(int64_t step, const std::string& why, bool finished);
  // Tells the peers the run failed or was stopped.
  void abort(const std::string& reason);
  // "worker=1: transport to worker0 (left): shm; to worker2 (right): tcp (...)".
  void print_links(int name_index);

  int64_t views() const { return views_; }
  // An elastic job's membership, as the coordinator's views settle it; the strategy says when
  // one took effect.
  Membership& membership() { return members_; }
  const Membership& membership() const { return members_; }

 private:
  RingOptions options(int size, int rank, const HostPort& right) const;
  int workers_on_host(const std::string& host) const;
  std::string rank_prefix() const;
  void print_changes(const MembershipView& view, const MembershipView& before);

  const TrainConfig& c_;
  const AllreduceClusterConfig& config_;
  std::ostream& out_;
  int rank_;
  std::vector<TaskId> workers_;  // the cluster's, in rank order
  int planned_workers_ = 0;
  uint64_t fingerprint_ = 0;
  std::unique_ptr<RingConnector> connector_;    // until the cluster's ring formed
  std::unique_ptr<RingLinks> ring_;             // the ring formed
  std::unique_ptr<Communicator> communicator_;  // over ring_
  MembershipClientOptions membership_options_;  // to join again once dropped
  std::unique_ptr<MembershipClient> membership_;
  MembershipView view_;
  int64_t views_ = 0;  // views this worker formed its ring from
  Membership members_;
};

// Rank `root`'s parameters, optimizer slots, moving average and global step, on every rank, and
// an elastic job's position in the data where `position` is set. Throws CollectiveError.
void broadcast_state(Communicator& communicator, TrainingState& state, int root,
                     DataPosition* position);

}  // namespace dtrain
