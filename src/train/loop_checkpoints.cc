#include "train/loop_checkpoints.h"

namespace dtrain {

LoopCheckpoints::LoopCheckpoints(const TrainConfig& config, TrainingState& state,
                                 Strategy& strategy, std::ostream& out)
    : c_(config), state_(state), strategy_(strategy), out_(out) {}

void LoopCheckpoints::open() {
  if (!c_.train_dir.empty()) checkpoints_.emplace(c_.train_dir, c_.keep_checkpoints);
}

void LoopCheckpoints::count_from(int64_t step) {
  if (c_.save_steps > 0) next_save_ = next_multiple(step, c_.save_steps);
  last_save_ = std::chrono::steady_clock::now();
}

std::optional<std::filesystem::path> LoopCheckpoints::dir() const {
  if (!checkpoints_) return std::nullopt;
  return c_.train_dir;
}

std::optional<int64_t> LoopCheckpoints::restore(std::string_view who) {
  if (checkpoints_) {
    const auto step = restore_newest(*checkpoints_, state_, who, out_);
    out_ << std::flush;
    if (step) return step;
  }
  if (c_.initial_state == nullptr) return std::nullopt;
  // Slots belong to the optimizer that filled them: another one starts its own afresh.
  if (c_.initial_state->optimizer == state_.optimizer().name()) {
    state_.restore(*c_.initial_state);
  } else {
    state_.restore_parameters(*c_.initial_state);
  }
  return 0;
}

void LoopCheckpoints::save_if_due() {
  if (!checkpoints_) return;
  bool due = false;
  if (c_.save_steps > 0 && state_.step >= next_save_) {
    next_save_ = next_multiple(state_.step, c_.save_steps);
    due = true;
  }
  const std::chrono::duration<double> since = std::chrono::steady_clock::now() - last_save_;
  if (c_.save_secs > 0 && since.count() >= c_.save_secs) due = true;
  if (!due) return;
  strategy_.before_checkpoint(state_);
  write();
}

void LoopCheckpoints::write_last() {
  if (checkpoints_) write();
}

void LoopCheckpoints::write() {
  const CheckpointInfo info{state_.step, state_.model().name(), state_.optimizer().name(),
                            train_config_json(c_)};
  checkpoints_->save(info, state_.tensors());
  last_save_ = std::chrono::steady_clock::now();
}

}  // namespace dtrain
