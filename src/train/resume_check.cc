// The resume check: a checkpoint's recorded settings against this run's, each under the rule and
// named by the flag that the run plan's record gives it (TrainConfig::recorder).
#include "train/resume_check.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <ostream>
#include <span>
#include <string_view>

#include "base/error.h"
#include "ckpt/checkpoint_manager.h"

namespace dtrain {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Values as their flags are written: 0.1 rather than the float's 0.10000000149011612.
std::string shown(const json& value) {
  if (value.is_number_float()) return fmt::format("{}", static_cast<float>(value.get<double>()));
  if (value.is_string())
    return value.get<std::string>().empty() ? "\"\"" : value.get<std::string>();
  return value.dump();
}

// A recorded model spec less dtrain's own keys (nn/keras_json.h: its training defaults, the layer
// --hidden_units sizes): they are not the architecture, and older checkpoints have none.
json architecture(json spec) {
  if (spec.is_object()) spec.erase("dtrain");
  return spec;
}

const RecordedKey* recorded_key(std::span<const RecordedKey> keys, std::string_view path) {
  const auto it =
      std::find_if(keys.begin(), keys.end(), [&](const RecordedKey& k) { return k.key == path; });
  return it == keys.end() ? nullptr : &*it;
}

// Each recorded setting the checkpoint has, as (flag, checkpoint value, this run's value), under
// its key's rule. `level`: the path of `now` in the recorded JSON ("" at the top).
void compare(const json& before, const json& now, std::span<const RecordedKey> keys,
             const std::string& level, std::vector<SettingChange>& changes) {
  for (const auto& [key, value] : now.items()) {
    const std::string path = level.empty() ? key : level + "." + key;
    const RecordedKey* known = recorded_key(keys, path);
    if ((known != nullptr && known->rule == ResumeRule::kNotCompared) || !before.contains(key))
      continue;
    const json& old = before[key];
    if (old.is_null() || value.is_null()) continue;  // unknown on one side: nothing to compare
    if (value.is_object()) {
      if (old.is_object()) compare(old, value, keys, path, changes);
      continue;
    }
    if (old == value) continue;
    const bool named = known != nullptr && !known->flag.empty();
    changes.push_back({named ? std::string(known->flag) : "--" + key, shown(old), shown(value),
                       known == nullptr || known->rule != ResumeRule::kNotResumable});
  }
}

// A global batch that changed only because --batch_size did (the same workers per step) says
// nothing the --batch_size change does not.
void drop_implied_global_batch(const json& before, const json& now,
                               std::vector<SettingChange>& changes) {
  const auto workers_per_step = [](const json& settings) {
    const json& global = settings.value("global_batch", json());
    const json& batch = settings.value("batch_size", json());
    return global.is_number_integer() && batch.is_number_integer() && batch.get<int64_t>() > 0
               ? global.get<int64_t>() / batch.get<int64_t>()
               : int64_t{-1};
  };
  if (workers_per_step(before) < 0 || workers_per_step(before) != workers_per_step(now)) return;
  std::erase_if(changes, [](const SettingChange& c) { return c.flag.starts_with("the global"); });
}

}  // namespace

std::optional<FoundCheckpoint> find_checkpoint(const TrainConfig& config) {
  if (config.train_dir.empty()) return std::nullopt;
  CheckpointManager::RestoreResult restored = CheckpointManager(config.train_dir).restore_latest();
  if (!restored.checkpoint) return std::nullopt;
  FoundCheckpoint found{restored.path, restored.checkpoint->global_step, {}};
  const json& recorded = restored.checkpoint->config;
  if (recorded.is_object() && config.recorder != nullptr) {
    const json now = train_config_json(config);
    compare(recorded, now, config.recorder->keys, "", found.changes);
    drop_implied_global_batch(recorded, now, found.changes);
    // Same name, another architecture: a user's JSON file edited between runs.
    if (found.changes.empty() && recorded.contains("model_spec") &&
        architecture(recorded["model_spec"]) != architecture(now["model_spec"])) {
      found.changes.push_back({"--model", recorded.value("model", ""), "its architecture changed",
                               /*resumable=*/false});
    }
  }
  return found;
}

std::string describe_changes(const std::vector<SettingChange>& changes) {
  std::string text;
  for (const SettingChange& c : changes) {
    if (!text.empty()) text += ", ";
    text += fmt::format("{} {} (now {})", c.flag, c.checkpoint, c.now);
  }
  return text;
}

void settle_checkpoint(const TrainConfig& config, ResumeMode mode, const std::string& who,
                       std::ostream& out) {
  if (mode == ResumeMode::kOverwrite) {
    const size_t removed = CheckpointManager(config.train_dir).remove_all().size();
    // An earlier run's best weights (--early_stopping_patience) are its, not this run's.
    const size_t best = CheckpointManager(config.train_dir / "best").remove_all().size();
    std::error_code ec;
    const bool metrics = fs::remove(config.train_dir / "metrics.jsonl", ec);
    fmt::print(out, "{}: --overwrite: removed {} checkpoint(s){}{} from {}; starting afresh\n", who,
               removed, best > 0 ? fmt::format(", {} in best/", best) : "",
               metrics ? " and metrics.jsonl" : "", config.train_dir.string());
    out << std::flush;
    return;
  }
  const bool resume = mode == ResumeMode::kResume || mode == ResumeMode::kLauncherSettled;
  const std::optional<FoundCheckpoint> found = find_checkpoint(config);
  if (!found) {
    if (mode == ResumeMode::kResume) {
      fmt::print(out, "{}: --resume: no checkpoint in {}; starting afresh\n", who,
                 config.train_dir.string());
    }
    return;
  }
  const bool resumable = std::all_of(found->changes.begin(), found->changes.end(),
                                     [](const SettingChange& c) { return c.resumable; });
  if (!found->changes.empty() && (!resume || !resumable)) {
    throw UsageError(fmt::format(
        "--train_dir {}: holds a checkpoint of step {} trained with other settings: {}; {}",
        config.train_dir.string(), found->step, describe_changes(found->changes),
        resumable ? "pass --resume to go on from it with the new settings, --overwrite to start "
                    "afresh, or give another --train_dir"
                  : "it cannot be resumed with these; pass --overwrite to start afresh, or give "
                    "another --train_dir"));
  }
  // A task its launcher told to resume says so only when something changed: the restore line
  // follows anyway.
  if (resume && found->changes.empty()) return;
  fmt::print(out, "{}: found {} (global step {}): resuming from it{}\n", who, found->path.string(),
             found->step,
             found->changes.empty()
                 ? " (--overwrite starts afresh)"
                 : fmt::format(" with changed settings: {}", describe_changes(found->changes)));
  out << std::flush;
}

}  // namespace dtrain
