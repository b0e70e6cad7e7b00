// The learning-rate schedule of a run's settings, and the part of them a checkpoint keeps.
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
