#include "cluster/membership_view.h"

namespace dtrain {

int MembershipView::rank_of(std::string_view name) const {
  for (int r = 0; r < size(); ++r)
    if (members[static_cast<size_t>(r)].name == name) return r;
  return -1;
}

std::vector<std::string> MembershipView::names() const {
  std::vector<std::string> all;
  for (const ViewMember& m : members) all.push_back(m.name);
  return all;
}

}  // namespace dtrain
