// Each step's vote among the ranks of an all-reduce ring, one small all-reduce after the update:
// how many ranks got each of the signals that halt a run, and every rank's own time of the step
// (its data, its delay, its gradients: what it did outside the collectives), from which the chief
// names the stragglers (metrics/straggler_watch.h) on its lines and its live page.
#pragma once

#include <array>
#include <chrono>
#include <csignal>
#include <functional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "metrics/run_board.h"
#include "metrics/straggler_watch.h"
#include "train/allreduce_ring.h"

namespace dtrain {

class RingStepVote {
 public:
  static constexpr std::array<int, 3> kSignals = {SIGTERM, SIGHUP, SIGINT};

  // REQUIRES: ring and out outlive this.
  RingStepVote(AllreduceRing& ring, std::ostream& out) : ring_(ring), out_(out) {}

  // A collective ended: what follows is this rank's own time, until the next one.
  void collective_ended() { own_since_ = std::chrono::steady_clock::now(); }
  // The step's gradients are computed: its own time ends here.
  void own_part_ended() {
    own_seconds_ =
        std::chrono::duration<float>(std::chrono::steady_clock::now() - own_since_).count();
  }

  // The vote (throws CollectiveError as the ring does): for each of kSignals, how many ranks got
  // it. The chief then says which ranks straggle.
  std::array<float, kSignals.size()> vote(int own_signal);

  // The chief's live page hears of every rank's own time after each vote.
  void observe(std::function<void(const WorkerTimes&)> observer) {
    observer_ = std::move(observer);
  }
  // The chief's summary since its last ("own step time (ms, mean of 20 steps): ..."); empty
  // when there is none.
  std::string take_summary();

 private:
  AllreduceRing& ring_;
  std::ostream& out_;
  std::vector<float> votes_;  // one count per signal, then every rank's own seconds
  std::chrono::steady_clock::time_point own_since_ = std::chrono::steady_clock::now();
  float own_seconds_ = 0;
  StragglerWatch stragglers_{"its own part of a step (outside the collectives)"};  // the chief's
  std::function<void(const WorkerTimes&)> observer_;
};

}  // namespace dtrain
