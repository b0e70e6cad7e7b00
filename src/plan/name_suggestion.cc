// The closest name: spelling, aliases, prefixes, then edit distance.
#include "plan/name_suggestion.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace dtrain {
namespace {

// "--Train-Steps" -> "train_steps".
std::string normalized(std::string_view name) {
  while (!name.empty() && name.front() == '-') name.remove_prefix(1);
  std::string out;
  for (const char c : name)
    out += c == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// What other tools call a flag of dtrain's (Keras, TensorFlow's Estimator and tutorials, PyTorch's
// launchers), normalized: the name there, then ours.
struct Alias {
  std::string_view theirs, ours;
};
constexpr Alias kAliases[] = {
    {"lr", "learning_rate"},    {"max_steps", "train_steps"},
    {"steps", "train_steps"},   {"num_steps", "train_steps"},
    {"num_epochs", "epochs"},   {"bs", "batch_size"},
    {"model_dir", "train_dir"}, {"checkpoint_dir", "train_dir"},
    {"weight_decay", "l2"},     {"num_workers", "workers"},
    {"num_ps", "ps"},           {"nproc", "workers"},
    {"evaluate", "eval"},
};

// Optimal string alignment distance: insertions, deletions, substitutions and swaps of two
// neighbours ("lerning", "laerning") each count 1.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::optional<std::string> closest_name(std::string_view given,
                                        std::span<const std::string> known) {
  const std::string typed = normalized(given);
  if (typed.empty()) return std::nullopt;
  std::vector<std::string> names;
  for (const std::string& name : known) names.push_back(normalized(name));
  auto entry = [&](std::string_view name) -> std::optional<std::string> {
    const auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end()) return std::nullopt;
    return known[static_cast<size_t>(it - names.begin())];
  };
  if (std::optional<std::string> same = entry(typed)) return same;
  for (const Alias& alias : kAliases) {
    if (alias.theirs != typed) continue;
    if (std::optional<std::string> ours = entry(alias.ours)) return ours;
  }
  if (typed.size() >= 3) {
    std::optional<std::string> only;
    int beginning = 0;
    for (size_t i = 0; i < names.size(); ++i) {
      if (!names[i].starts_with(typed)) continue;
      ++beginning;
      only = known[i];
    }
    if (beginning == 1) return only;
  }
  const size_t allowed = typed.size() <= 4 ? 1 : 2;
  std::optional<std::string> nearest;
  size_t best = allowed + 1;
  for (size_t i = 0; i < names.size(); ++i) {
    const size_t distance = edit_distance(typed, names[i]);
    if (distance < best) {
      best = distance;
      nearest = known[i];
    }
  }
  return nearest;
}

}  // namespace dtrain
