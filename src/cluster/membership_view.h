// Who is in an elastic job (issue 35; DESIGN.md §2a "Membership"): the job's coordinator
// (cluster/membership_service.h) numbers each membership it settles — a view — and every worker
// in it forms its ring from it (cluster/membership_client.h). The frames both speak, and the view.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "comm/frame_format.h"
#include "comm/host_port.h"

namespace dtrain {

struct ViewMember {
  std::string name;   // the worker's task name, "worker1": kept across views
  HostPort address;   // where it listens for its ring's left neighbour
  int64_t step = -1;  // the global step its state is at; -1: it holds none yet (a joiner)
};

struct MembershipView {
  uint64_t id = 0;                  // 1 for the job's first view, then one more for each change
  std::vector<ViewMember> members;  // in rank order: rank r is members[r]
  // The rank whose training state every member takes before the next step: the one furthest
  // along (the lowest such rank on a tie).
  int source = 0;
  // No member holds a state yet: rank 0 initialises (or restores the newest checkpoint).
  bool fresh = true;
  // What changed since the last view, one line each ("worker1 left at step 412 (SIGTERM)").
  std::vector<std::string> changes;

  int size() const { return static_cast<int>(members.size()); }
  // This worker's rank in the view, -1 if it is not in it.
  int rank_of(std::string_view name) const;
  std::vector<std::string> names() const;
};

// The task index in a member's name ("worker12" -> 12, "chief0" -> 0): a job's name in lower-case
// letters, then the index in decimal digits below kMaxMemberIndex. nullopt for any other name, so
// that a name from the wire is refused by name rather than overflowing a parse.
inline constexpr int kMaxMemberIndex = 1'000'000;
std::optional<int> member_index(std::string_view name);

namespace membership_protocol {
// Every frame's meta is one JSON object.
constexpr uint16_t kHello = frame_format::kFirstUserType;  // worker: {"name", "settings"}
constexpr uint16_t kReady = kHello + 1;                    // worker: {"view", "step", "address"}
constexpr uint16_t kLeave = kHello + 2;                    // worker: {"step", "why", "finished"}
constexpr uint16_t kChange = kHello + 3;                   // coordinator: {"view", "why"}
constexpr uint16_t kView = kHello + 4;                     // coordinator: the view
constexpr uint16_t kRefused = kHello + 5;  // coordinator: {"error"}: this worker may not join
constexpr uint16_t kFailed = kHello + 6;   // coordinator: {"error"}: the job cannot go on
constexpr uint16_t kWelcome =
    kHello + 7;  // coordinator: {"workers", "min_workers"}: admitted; the job's bounds
inline bool carries_no_tensors(uint16_t /*type*/) { return false; }
}  // namespace membership_protocol

}  // namespace dtrain
