// One idea of who is in a job (DESIGN.md §2a "One Membership"), whoever settles it: an elastic
// all-reduce job's coordinator (its views, cluster/membership_client.h), a sync job's ps tasks
// (their count of the workers, in every reply: ps/worker_count.h), an async job's ps0 (the
// identities it hands to joining workers, ps/worker_claim.h). What a strategy knows of it: the
// membership in force, and the changes it has not yet told at a step boundary.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dtrain {

struct MembershipState {
  // 0 before the first; then higher at each change (a coordinator's view id, a ps's count of
  // changes).
  uint64_t version = 0;
  int workers = 0;     // in the job
  int rank = -1;       // this worker's place in it; -1: not known here (a ps job's worker)
  int64_t left = 0;    // workers that left or were lost since the job started
  int64_t joined = 0;  // workers that joined it since
};

// Not thread-safe: the strategy's thread feeds it and reads it.
class Membership {
 public:
  const MembershipState& current() const { return current_; }
  // What the feeder settled: the membership in force from now on (its version as the feeder
  // numbers it: a restarted ps task counts afresh).
  void settle(const MembershipState& next);
  // The membership in force took effect at global step `step` (its ring formed, its count heard):
  // told at the next step boundary.
  void took_effect(int64_t step);
  // The workers of each membership that took effect since the last boundary, with its step
  // (StepBoundary::worker_counts, the chief's scalar "workers"); then none until the next.
  std::vector<std::pair<int64_t, double>> take_at_boundary();
  // "1 worker(s) left, 1 joined", for a run's closing counters.
  std::string counts() const;

 private:
  MembershipState current_;
  std::vector<std::pair<int64_t, double>> pending_;  // not yet taken at a boundary
};

}  // namespace dtrain
