// The membership in force, and what is told of it at the next step boundary.
#include "cluster/membership.h"

#include <fmt/format.h>

namespace dtrain {

void Membership::settle(const MembershipState& next) { current_ = next; }

void Membership::took_effect(int64_t step) {
  pending_.emplace_back(step, static_cast<double>(current_.workers));
}

std::vector<std::pair<int64_t, double>> Membership::take_at_boundary() {
  return std::exchange(pending_, {});
}

std::string Membership::counts() const {
  return fmt::format("{} worker(s) left, {} joined", current_.left, current_.joined);
}

}  // namespace dtrain
