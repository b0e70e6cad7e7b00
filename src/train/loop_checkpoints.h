// The chief's checkpoints of a run (--train_dir): where a run restores from, and the cadence it
// saves at (--save_steps, --save_secs), from the start or from the membership change that made
// this worker the chief.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string_view>

#include "ckpt/checkpoint_manager.h"
#include "train/strategy.h"
#include "train/train_config.h"
#include "train/training_state.h"

namespace dtrain {

class LoopCheckpoints {
 public:
  // REQUIRES: every argument outlives this.
  LoopCheckpoints(const TrainConfig& config, TrainingState& state, Strategy& strategy,
                  std::ostream& out);

  // The chief's (a no-op without --train_dir), or no longer.
  void open();
  void close() { checkpoints_.reset(); }
  // The cadence counts from global step `step`: the run's first, or the one this worker became
  // the chief at.
  void count_from(int64_t step);
  // Where they are written; nullopt when this worker writes none.
  std::optional<std::filesystem::path> dir() const;

  // The newest valid checkpoint into the state, else the owner's initial state (Python's fit),
  // and its global step; nullopt for neither. `who` names this process in the restore lines.
  std::optional<int64_t> restore(std::string_view who);
  // After a step: writes one where the cadence says, the strategy's state brought up to date.
  void save_if_due();
  // The run's last, of the state as the strategy's finish left it.
  void write_last();

 private:
  void write();

  const TrainConfig& c_;
  TrainingState& state_;
  Strategy& strategy_;
  std::ostream& out_;
  std::optional<CheckpointManager> checkpoints_;
  int64_t next_save_ = 0;
  std::chrono::steady_clock::time_point last_save_;
};

}  // namespace dtrain
