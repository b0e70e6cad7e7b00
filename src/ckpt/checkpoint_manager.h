// CheckpointManager: a directory of checkpoints named by global step, an index naming the newest,
// retention of the newest few, and restore of the newest one that validates.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"

namespace dtrain {

// Layout (ckpt/checkpoint_format.h): dir/model.ckpt-<step>.safetensors, and dir/checkpoint, a JSON
// index {"latest": ..., "all": [oldest .. newest]} for people and other tools. The index is
// advisory: restore scans the directory, because a crash can leave the index stale. Checkpoints are
// ordered by global step. Temporary files left by a crash ("*.tmp-<pid>") are ignored by restore
// and removed by the next save.
//
// Not thread-safe: one task (the chief) saves. Other processes may restore concurrently; a file
// that retention deletes under them is skipped like any unreadable one.
class CheckpointManager {
 public:
  // keep <= 0 keeps every checkpoint. The directory is created by the first save.
  explicit CheckpointManager(std::filesystem::path dir, int keep = 5);

  const std::filesystem::path& dir() const { return dir_; }

  // Writes dir/model.ckpt-<step>.safetensors atomically (overwriting a checkpoint of the same
  // step), then atomically rewrites the index, then deletes all but the newest `keep` checkpoints
  // (never the one just written) and leftover temporary files. Returns the path written. Throws
  // CheckpointError for invalid input and IoError for operating-system failures; an IoError from
  // the clean-up after a successful write says that the checkpoint itself was saved.
  std::filesystem::path save(const CheckpointInfo& info, std::span<const TensorRef> tensors);

  struct RestoreResult {
    std::optional<Checkpoint> checkpoint;  // empty when no checkpoint validates
    std::filesystem::path path;            // the file restored from, if any
    std::vector<std::string> skipped;      // "<file>: <why>", newest first
  };
  // Tries the checkpoint files in dir, newest step first, and returns the first that validates. A
  // missing or empty directory is not an error: the result simply holds no checkpoint.
  // Throws IoError only if the directory exists but cannot be listed.
  RestoreResult restore_latest() const;

  // The checkpoint files in dir, oldest step first.
  std::vector<std::filesystem::path> list() const;

  // Deletes every checkpoint file and the index, for a run that starts afresh (--overwrite); other
  // files in dir are left alone. Returns the checkpoint files deleted. Throws IoError naming the
  // file that cannot be deleted.
  std::vector<std::filesystem::path> remove_all() const;

  // "model.ckpt-<step>.safetensors". REQUIRES: step >= 0.
  static std::string file_name(int64_t step);
  // The step of a checkpoint file name, or nullopt if name is not one (leading zeros are not).
  static std::optional<int64_t> step_of(std::string_view name);

 private:
  struct Entry {
    int64_t step;
    std::filesystem::path path;
  };
  std::vector<Entry> scan() const;
  void write_index(const std::vector<Entry>& kept) const;
  // Removes the doomed checkpoints and every leftover temporary file.
  void remove_stale(const std::vector<Entry>& doomed, const std::filesystem::path& saved) const;

  std::filesystem::path dir_;
  int keep_;
};

}  // namespace dtrain
