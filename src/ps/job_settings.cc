// Settings compared key by key, so that a refusal names the one that differs.
#include "ps/job_settings.h"

#include <fmt/format.h>

#include <algorithm>

namespace dtrain {

namespace {

constexpr size_t kShownChars = 60;

std::string shown(const nlohmann::json& value) {
  if (value.is_null()) return "none";
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > kShownChars) text = text.substr(0, kShownChars - 3) + "...";
  return text;
}

std::string joined(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

std::optional<std::string> difference_at(const std::string& path, const nlohmann::json& ours,
                                         const nlohmann::json& theirs) {
  if (ours.is_object() && theirs.is_object()) {
    for (const auto& [key, value] : ours.items()) {
      // What one side leaves out it was not told (the job's size, to a worker that joined) or
      // was not given (a ps's own flags, against the chief's).
      const auto it = theirs.find(key);
      if (it == theirs.end()) continue;
      if (auto d = difference_at(joined(path, key), value, *it)) return d;
    }
    return std::nullopt;
  }
  // A list of records (the layout) is compared record by record; a list of values (a shape), whole.
  const auto records = [](const nlohmann::json& list) {
    return std::all_of(list.begin(), list.end(),
                       [](const nlohmann::json& item) { return item.is_object(); });
  };
  if (ours.is_array() && theirs.is_array() && records(ours) && records(theirs)) {
    if (ours.size() != theirs.size()) {
      return fmt::format("{} ({} entries here, {} there)", path, ours.size(), theirs.size());
    }
    for (size_t i = 0; i < ours.size(); ++i) {
      if (auto d = difference_at(fmt::format("{}[{}]", path, i), ours[i], theirs[i])) return d;
    }
    return std::nullopt;
  }
  if (ours == theirs) return std::nullopt;
  return fmt::format("{} ({} here, {} there)", path, shown(ours), shown(theirs));
}

}  // namespace

std::optional<std::string> settings_difference(const nlohmann::json& ours,
                                               const nlohmann::json& theirs) {
  return difference_at("", ours, theirs);
}

std::string settings_flag(const std::string& path) {
  if (path.starts_with("model.name") || path.starts_with("model.layout")) return "--model";
  if (path == "optimizer.name") return "--optimizer";
  const auto end = std::find_if(path.begin(), path.end(), [](char c) { return c == '['; });
  const std::string key(path.begin(), end);
  const auto dot = key.rfind('.');
  return "--" + (dot == std::string::npos ? key : key.substr(dot + 1));
}

}  // namespace dtrain
