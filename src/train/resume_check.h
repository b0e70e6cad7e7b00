// What a run finds in its --train_dir before it starts: the newest checkpoint, and the settings
// that change the result in which that checkpoint's run differs from this one. A run that would
// restore it says so first, and one whose settings differ refuses unless told --resume (go on with
// the new settings) or --overwrite (start afresh): silently restoring another run's state, or
// silently mixing two recipes, is how a user ends up trusting a number nobody trained.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "train/train_config.h"

namespace dtrain {

struct SettingChange {
  std::string flag;        // "--learning_rate"
  std::string checkpoint;  // its value in the checkpoint's run, as JSON ("0.5")
  std::string now;         // its value in this run
  bool resumable = true;   // false: the checkpoint cannot be restored under the new value
};

struct FoundCheckpoint {
  std::filesystem::path path;
  int64_t step = 0;
  std::vector<SettingChange> changes;
};

// The newest checkpoint in config.train_dir that validates, compared with config. nullopt when
// there is no train_dir or no checkpoint in it. Settings the checkpoint does not record (written
// by an older dtrain) are not compared.
std::optional<FoundCheckpoint> find_checkpoint(const TrainConfig& config);

// "--learning_rate 0.5 (now 0.1), --batch_size 100 (now 50)".
std::string describe_changes(const std::vector<SettingChange>& changes);

// kLauncherSettled: as kResume, in a task whose launcher has settled the checkpoint for the whole
// cluster and passed --resume on, so that a task restarted later goes on from what the run saved
// since: without a checkpoint it says nothing (the user gave no --resume to this task).
enum class ResumeMode { kDefault, kResume, kOverwrite, kLauncherSettled };

// Applies the rule above and says what it does on `out`: resumes (printing where from), refuses
// with a UsageError naming the changed flags, or, for kOverwrite, deletes the checkpoints (those in
// best/ too) and metrics.jsonl so the run starts afresh. `who` prefixes the lines ("dtrain train").
void settle_checkpoint(const TrainConfig& config, ResumeMode mode, const std::string& who,
                       std::ostream& out);

}  // namespace dtrain
