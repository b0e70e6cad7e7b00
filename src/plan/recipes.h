// The defaults dtrain picks for each model: the training settings its spec names (the built-in
// models name the settings of the tutorial each comes from, with epochs chosen so the default run
// reaches the accuracy those tutorials report), and Keras' defaults (FlagValues') for what it does
// not name. A recipe key is a flag's name without "--"; the flag table's recipe rows say which.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "nn/model_spec.h"
#include "plan/flag_values.h"
#include "train/train_config.h"

namespace dtrain {

// Sets the field of each flag that `spec`'s recipe names, unless given(flag) (it is on the command
// line). Throws UsageError naming `source` and the key for a key that names no recipe flag, or a
// value of the wrong type.
void apply_recipe(const ModelSpec& spec, const std::string& source, FlagValues& flags,
                  const std::function<bool(std::string_view flag)>& given);

// The settings a recipe may give, from `flags` into `config`.
void set_recipe_settings(const FlagValues& flags, TrainConfig& config);

// Runs the check of each flag the recipe gave (not given(flag)) on config, blaming the model's file
// (`source`) rather than a flag the user never gave: "tiny.json: dtrain defaults optimizer lion:
// unknown; choose one of sgd, momentum, adam".
void check_recipe(const ModelSpec& spec, const std::string& source, const TrainConfig& config,
                  const std::function<bool(std::string_view flag)>& given);

// model is one of model_names() or a Keras JSON file, resolved here once (config.model.source);
// its recipe, with Keras' defaults for the rest, on an otherwise default TrainConfig: the
// configuration of library users that build one by hand (tests, benchmarks). Throws the UsageError
// or IoError of resolve_model(), and those of apply_recipe and check_recipe.
TrainConfig recipe_for(const std::string& model);

// The optimizer a model file was compiled with (ModelSpec::optimizer), onto config: its name and
// settings, each but those a flag gives (`given`); nothing of it when --optimizer is given, whose
// optimizer it is not. Either way config.optimizer_note says so, naming the file. Throws
// UsageError when the file's "dtrain" defaults name another optimizer.
void apply_compiled_optimizer(const ModelSpec& spec, const std::string& source,
                              const std::function<bool(std::string_view flag)>& given,
                              TrainConfig& config);

}  // namespace dtrain
