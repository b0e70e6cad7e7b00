// The defaults dtrain picks for each model: the training settings its spec names (the built-in
// models name the settings of the tutorial each comes from, with epochs chosen so the default run
// reaches the accuracy those tutorials report), and Keras' defaults for what it does not name.
#pragma once

#include <string>

#include "train/train_config.h"

namespace dtrain {

// model is one of model_names() or a Keras JSON file, resolved here once (config.model.source);
// what the spec's "dtrain" defaults leave out is Keras' Adam (lr 1e-3), no decay, no moving
// average and 10 epochs. Throws the UsageError or IoError of resolve_model().
TrainConfig recipe_for(const std::string& model);

}  // namespace dtrain
