// The settings a checkpoint records (train/train_config.h, train_config_json), derived from the
// flag table: each row's Recorded key, value and resume rule (plan/flags.h), plus the few recorded
// keys that no flag sets. The run plan hands them to train/ as TrainConfig::recorder.
#pragma once

#include <nlohmann/json.hpp>

#include "train/train_config.h"

namespace dtrain {

// The recorded settings of `config`, its effective values (after the model's recipe): the keys of
// the flag table's recorded rows at their paths, and model_spec, eval_moving_average,
// data.options and data.input_scaling, which no one flag sets.
nlohmann::json recorded_settings(const TrainConfig& config);

// recorded_settings, and every recorded key with the flag that sets it and its resume rule: what
// a plan's TrainConfig::recorder points to.
const SettingsRecord& settings_record();

}  // namespace dtrain
