// The learning-rate schedule of a run's settings, and what a checkpoint records of them (through
// the recorder the run plan gives).
#include "train/train_config.h"

namespace dtrain {

LrSchedule lr_schedule_of(const TrainConfig& c, int64_t global_steps_per_epoch,
                          int64_t total_steps) {
  LrSchedule s{.base = c.learning_rate,
               .decay_rate = c.lr_decay_rate,
               .decay_steps = c.lr_decay_steps,
               .staircase = c.lr_staircase,
               .decay = c.lr_schedule,
               .alpha = c.lr_alpha,
               .boundaries = c.lr_boundaries,
               .values = c.lr_values,
               .warmup_steps = c.lr_warmup_steps};
  if (s.decay_steps == 0)
    s.decay_steps = c.lr_schedule == LrDecay::kCosine ? total_steps : global_steps_per_epoch;
  return s;
}

nlohmann::json train_config_json(const TrainConfig& c) {
  return c.recorder != nullptr ? c.recorder->settings(c) : nlohmann::json::object();
}

}  // namespace dtrain
