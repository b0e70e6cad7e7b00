// What a run's settings make of its length (steps, evaluations, the learning-rate schedule), and
// what a checkpoint records of them (through the recorder the run plan gives).
#include "train/train_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "base/error.h"

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

int64_t total_global_steps(const TrainConfig& c, int64_t global_steps_per_epoch) {
  if (c.train_steps > 0) return c.train_steps;
  const double steps = std::ceil(c.epochs * static_cast<double>(global_steps_per_epoch));
  // Past this a step count no longer converts to an integer (1e30 epochs became a negative count
  // and a run that trained nothing); nor does any run come near it.
  if (!(steps <= static_cast<double>(kMostGlobalSteps))) {
    throw UsageError(fmt::format(
        "--epochs {}: {} epochs of {} global steps is more steps than a run can count (at most "
        "2^62); give fewer epochs, or --train_steps",
        c.epochs, c.epochs, global_steps_per_epoch));
  }
  return static_cast<int64_t>(steps);
}

int64_t eval_interval(const TrainConfig& c, int64_t global_steps_per_epoch) {
  if (c.eval_every > 0) return c.eval_every;
  if (c.eval_each_epoch) return std::max<int64_t>(1, global_steps_per_epoch);
  if (!c.target_accuracy) return 0;
  return std::max<int64_t>(1, global_steps_per_epoch / 4);
}

nlohmann::json train_config_json(const TrainConfig& c) {
  return c.recorder != nullptr ? c.recorder->settings(c) : nlohmann::json::object();
}

}  // namespace dtrain
