#include "train/resume_check.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <array>
#include <ostream>
#include <span>
#include <string_view>

#include "base/error.h"
#include "ckpt/checkpoint_manager.h"

namespace dtrain {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Recorded settings that do not change what training computes: where the test data are, how the
// final evaluation reads the weights, and text for people.
constexpr std::array<std::string_view, 6> kNotCompared = {
    "eval_moving_average", "towers", "test_data", "data_dir", "input_scaling", "model_spec"};
// A checkpoint of another model or optimizer cannot be restored into this run at all.
constexpr std::array<std::string_view, 3> kNotResumable = {"model", "hidden_units", "optimizer"};

// Values as their flags are written: 0.1 rather than the float's 0.10000000149011612.
std::string shown(const json& value) {
  if (value.is_number_float()) return fmt::format("{}", static_cast<float>(value.get<double>()));
  if (value.is_string())
    return value.get<std::string>().empty() ? "\"\"" : value.get<std::string>();
  return value.dump();
}

// A recorded model spec less its training defaults (nn/keras_json.h): they are not the
// architecture, and checkpoints written before the spec carried them have none.
json architecture(json spec) {
  if (spec.is_object()) spec.erase("dtrain");
  return spec;
}

bool listed(std::string_view key, std::span<const std::string_view> keys) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

// Each recorded setting the checkpoint has, as (flag, checkpoint value, this run's value). The
// data options sit one level down, named as their flags are.
void compare(const json& before, const json& now, std::vector<SettingChange>& changes) {
  for (const auto& [key, value] : now.items()) {
    if (listed(key, kNotCompared) || !before.contains(key)) continue;
    const json& old = before[key];
    if (value.is_object()) {
      if (old.is_object()) compare(old, value, changes);
      continue;
    }
    if (old == value) continue;
    changes.push_back({"--" + key, shown(old), shown(value), !listed(key, kNotResumable)});
  }
}

}  // namespace

std::optional<FoundCheckpoint> find_checkpoint(const TrainConfig& config) {
  if (config.train_dir.empty()) return std::nullopt;
  CheckpointManager::RestoreResult restored = CheckpointManager(config.train_dir).restore_latest();
  if (!restored.checkpoint) return std::nullopt;
  FoundCheckpoint found{restored.path, restored.checkpoint->global_step, {}};
  const json& recorded = restored.checkpoint->config;
  if (recorded.is_object()) {
    const json now = train_config_json(config);
    compare(recorded, now, found.changes);
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
  if (!found->changes.empty() && (mode != ResumeMode::kResume || !resumable)) {
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
  if (mode == ResumeMode::kResume && found->changes.empty()) return;
  fmt::print(out, "{}: found {} (global step {}): resuming from it{}\n", who, found->path.string(),
             found->step,
             found->changes.empty()
                 ? " (--overwrite starts afresh)"
                 : fmt::format(" with changed settings: {}", describe_changes(found->changes)));
  out << std::flush;
}

}  // namespace dtrain
