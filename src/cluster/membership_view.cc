#include "cluster/membership_view.h"

#include <algorithm>
#include <charconv>

namespace dtrain {

std::optional<int> member_index(std::string_view name) {
  size_t letters = 0;
  while (letters < name.size() && name[letters] >= 'a' && name[letters] <= 'z') ++letters;
  const std::string_view digits = name.substr(letters);
  // Digits only (from_chars takes a sign), one at least, and no leading zero but for "0" itself:
  // one name per index.
  const bool decimal = !digits.empty() && std::all_of(digits.begin(), digits.end(),
                                                      [](char c) { return c >= '0' && c <= '9'; });
  if (letters == 0 || !decimal || (digits.size() > 1 && digits[0] == '0')) return std::nullopt;
  int index = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (error != std::errc() || end != digits.data() + digits.size() || index >= kMaxMemberIndex) {
    return std::nullopt;
  }
  return index;
}

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
