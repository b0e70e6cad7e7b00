// Validation of a run's settings, and the part of them a checkpoint keeps.
#include "train/train_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "data/data_files.h"
#include "nn/model_zoo.h"
#include "optim/optimizer.h"

namespace dtrain {
namespace {

void check(bool ok, const std::string& message) {
  if (!ok) throw UsageError(message);
}

void check_lr_schedule(const TrainConfig& c) {
  const std::string kind = lr_decay_name(c.lr_schedule);
  check(c.lr_decay_steps >= 0,
        fmt::format("--lr_decay_steps {}: must not be negative", c.lr_decay_steps));
  check(c.lr_warmup_steps >= 0,
        fmt::format("--lr_warmup_steps {}: must not be negative", c.lr_warmup_steps));
  check(c.lr_alpha >= 0 && c.lr_alpha <= 1,
        fmt::format("--lr_alpha {}: must be in [0, 1] (the final rate as a fraction of "
                    "--learning_rate)",
                    c.lr_alpha));
  check(c.lr_alpha == 0 || c.lr_schedule == LrDecay::kCosine,
        fmt::format("--lr_alpha {}: only --lr_schedule cosine has a final fraction; the schedule "
                    "is {}",
                    c.lr_alpha, kind));
  const bool piecewise = c.lr_schedule == LrDecay::kPiecewise;
  check(piecewise || (c.lr_boundaries.empty() && c.lr_values.empty()),
        fmt::format("{}: only --lr_schedule piecewise takes boundaries and values; the schedule is "
                    "{}",
                    c.lr_boundaries.empty() ? "--lr_values" : "--lr_boundaries", kind));
  if (!piecewise) return;
  check(!c.lr_values.empty(),
        "--lr_schedule piecewise: give the rates with --lr_values and the steps where they change "
        "with --lr_boundaries (e.g. --lr_boundaries 1000,2000 --lr_values 0.1,0.01,0.001)");
  check(c.lr_values.size() == c.lr_boundaries.size() + 1,
        fmt::format("--lr_values {}: needs {} rates, one more than the {} of --lr_boundaries {}",
                    fmt::join(c.lr_values, ","), c.lr_boundaries.size() + 1, c.lr_boundaries.size(),
                    fmt::join(c.lr_boundaries, ",")));
  for (size_t i = 0; i < c.lr_boundaries.size(); ++i) {
    check(c.lr_boundaries[i] > (i == 0 ? 0 : c.lr_boundaries[i - 1]),
          fmt::format("--lr_boundaries {}: steps must be positive and strictly increasing",
                      fmt::join(c.lr_boundaries, ",")));
  }
  for (const float value : c.lr_values) {
    check(value > 0 && std::isfinite(value),
          fmt::format("--lr_values {}: every rate must be a positive number",
                      fmt::join(c.lr_values, ",")));
  }
}

// Periodic evaluation, the target and early stopping judge the held-out examples; with none held
// out they would judge the test set, which is how a run ends up tuned on its test data.
void check_validation(const TrainConfig& c) {
  check(
      c.early_stopping_patience >= 0,
      fmt::format("--early_stopping_patience {}: must not be negative", c.early_stopping_patience));
  check(c.early_stopping_patience == 0 || c.eval_every > 0,
        fmt::format("--early_stopping_patience {}: counts evaluations, and there are none: give "
                    "--eval_every N",
                    c.early_stopping_patience));
  if (c.validation_size > 0) return;
  const std::string flag = c.eval_every > 0 ? fmt::format("--eval_every {}", c.eval_every)
                           : c.target_accuracy
                               ? fmt::format("--target_accuracy {}", *c.target_accuracy)
                               : std::string();
  if (flag.empty()) return;
  check(c.shuffle_buffer == 0,
        fmt::format("{}: judges the validation examples held out of the training data, and "
                    "streamed data (--shuffle_buffer) holds none out; leave it out (the test set "
                    "is evaluated once, at the end)",
                    flag));
  check(false, fmt::format("{}: judges the validation examples held out of the training data, and "
                           "--validation_size is 0{}; hold some out with --validation_size N (the "
                           "test set is evaluated once, at the end)",
                           flag,
                           c.train_data.empty()
                               ? ""
                               : " (--train_data is trained on whole unless told otherwise)"));
}

}  // namespace

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

void validate_train_config(const TrainConfig& c) {
  check(c.batch_size >= 1, fmt::format("--batch_size {}: must be at least 1", c.batch_size));
  check(c.learning_rate > 0 && std::isfinite(c.learning_rate),
        fmt::format("--learning_rate {}: must be a positive number", c.learning_rate));
  check(
      c.lr_decay_rate > 0 && std::isfinite(c.lr_decay_rate),
      fmt::format("--lr_decay_rate {}: must be a positive number (1: no decay)", c.lr_decay_rate));
  check_lr_schedule(c);
  check(c.train_steps >= 0, fmt::format("--train_steps {}: must not be negative", c.train_steps));
  check(c.train_steps > 0 || (c.epochs > 0 && std::isfinite(c.epochs)),
        fmt::format("--epochs {}: must be positive (or give --train_steps)", c.epochs));
  check(c.threads >= 1, fmt::format("--threads {}: must be at least 1", c.threads));
  check(c.towers >= 1, fmt::format("--towers {}: must be at least 1", c.towers));
  check(c.towers <= c.batch_size,
        fmt::format("--towers {}: more towers than the {} examples of a batch (--batch_size)",
                    c.towers, c.batch_size));
  check(c.log_every >= 0, fmt::format("--log_every {}: must not be negative", c.log_every));
  check(c.log_secs >= 0 && std::isfinite(c.log_secs),
        fmt::format("--log_secs {}: must not be negative", c.log_secs));
  check(c.summary_steps >= 0,
        fmt::format("--summary_steps {}: must not be negative", c.summary_steps));
  check(c.eval_every >= 0, fmt::format("--eval_every {}: must not be negative", c.eval_every));
  check_validation(c);
  check(c.save_steps >= 0, fmt::format("--save_steps {}: must not be negative", c.save_steps));
  check(c.save_secs >= 0 && std::isfinite(c.save_secs),
        fmt::format("--save_secs {}: must not be negative", c.save_secs));
  check(c.shutdown_timeout_ms >= 1000,
        fmt::format("--shutdown_timeout {}: must be at least 1 second",
                    c.shutdown_timeout_ms / 1000.0));
  check(c.validation_size >= 0,
        fmt::format("--validation_size {}: must not be negative", c.validation_size));
  check(c.train_data.empty() == c.test_data.empty(),
        fmt::format("{} is given without {}: training on your own files needs both",
                    c.train_data.empty() ? "--test_data" : "--train_data",
                    c.train_data.empty() ? "--train_data" : "--test_data"));
  check(c.data_options.label_column != kNoLabelColumn,
        "--label_column none: training needs labels; name the label column, or leave the flag out "
        "to take the column named label, class, target or y, else the last");
  check(c.shuffle_buffer >= 0,
        fmt::format("--shuffle_buffer {}: must not be negative", c.shuffle_buffer));
  check(c.shuffle_buffer == 0 || !c.train_data.empty(),
        fmt::format("--shuffle_buffer {}: streams --train_data files; MNIST from --data_dir is "
                    "held in memory",
                    c.shuffle_buffer));
  check(c.shuffle_buffer == 0 || c.validation_size == 0,
        fmt::format("--validation_size {}: streamed training data (--shuffle_buffer) is not split; "
                    "leave --validation_size out",
                    c.validation_size));
  check(c.step_delay_ms >= 0,
        fmt::format("--step_delay_ms {}: must not be negative", c.step_delay_ms));
  check(!c.target_accuracy || (*c.target_accuracy > 0 && *c.target_accuracy <= 1),
        fmt::format("--target_accuracy {}: must be in (0, 1]", c.target_accuracy.value_or(0)));
  check(c.moving_average_decay >= 0 && c.moving_average_decay < 1,
        fmt::format("--moving_average_decay {}: must be in [0, 1)", c.moving_average_decay));
  check(!c.model.l2 || (*c.model.l2 >= 0 && std::isfinite(*c.model.l2)),
        fmt::format("--l2 {}: must not be negative", c.model.l2.value_or(0)));
  // The model is built here only to be checked (--model, --hidden_units): a Model holds no values.
  make_model(c.model);
  check(std::find(optimizer_names().begin(), optimizer_names().end(), c.optimizer.name) !=
            optimizer_names().end(),
        fmt::format("--optimizer {}: unknown; choose one of {}", c.optimizer.name,
                    fmt::join(optimizer_names(), ", ")));
  for (const int64_t step : c.nonfinite_gradient_steps) {
    check(step >= 1,
          fmt::format("--inject_nonfinite_at {}: steps are counted from 1 (this task's own steps)",
                      step));
  }
}

nlohmann::json train_config_json(const TrainConfig& c) {
  // The model's whole architecture (Keras JSON), so that any checkpoint rebuilds its model.
  return {{"model", c.model.name},
          {"model_spec", nlohmann::json::parse(model_spec_json(c.model).dump())},
          {"hidden_units", c.model.hidden_units},
          {"optimizer", c.optimizer.name},
          {"batch_size", c.batch_size},
          {"learning_rate", c.learning_rate},
          {"lr_decay_rate", c.lr_decay_rate},
          {"lr_schedule",
           {{"decay", lr_decay_name(c.lr_schedule)},
            {"decay_steps", c.lr_decay_steps},
            {"alpha", c.lr_alpha},
            {"boundaries", c.lr_boundaries},
            {"values", c.lr_values},
            {"warmup_steps", c.lr_warmup_steps}}},
          {"moving_average_decay", c.moving_average_decay},
          {"eval_moving_average", c.eval_moving_average},
          {"seed", c.seed},
          {"validation_size", c.validation_size},
          {"towers", c.towers},
          // What evaluation reads, and how examples become the model's input: uint8 pixels (IDX,
          // TFRecord bytes) scaled to [0, 1], numeric features (CSV, float_list) times the
          // feature scale. Paths absolute, so that eval finds them from any folder.
          {"data",
           {{"data_dir", c.data_dir.empty()
                             ? std::string()
                             : std::filesystem::absolute(c.data_dir).lexically_normal().string()},
            {"train_data", absolute_data_paths(c.train_data)},
            {"test_data", absolute_data_paths(c.test_data)},
            {"options", data_options_json(c.data_options)},
            {"input_scaling",
             fmt::format("uint8 pixels / 255; numeric features {}",
                         c.data_options.feature_scale ? "× " + c.data_options.feature_scale->text
                                                      : std::string("as given"))}}}};
}

}  // namespace dtrain
