// A ModelSpec to Keras Sequential model JSON, which nn/keras_json.h reads back: how a model
// travels in a checkpoint and out to Keras.
#pragma once

#include <nlohmann/json.hpp>

#include "nn/model_spec.h"

namespace dtrain {

// The spec as Keras 3 writes a Sequential model (InputLayer with batch_shape, layers with
// "module", "registered_name", initialisers as {"module": "keras.initializers", ...}), plus the
// "dtrain" names where a layer has them. read_keras_json reads it back to an equal spec.
nlohmann::ordered_json to_keras_json(const ModelSpec& spec);

}  // namespace dtrain
