// Keras Sequential model JSON (model.to_json() of Keras 2 and Keras 3, TensorFlow.js
// model.toJSON()) to a ModelSpec; back with nn/keras_json_writer.h. Options at their Keras defaults
// are accepted however a file spells them; any other layer class or option value is refused, naming
// the file, the layer and the option.
//
// dtrain's own parameter names ride in an extra key of a layer's config that Keras never writes
// and ignores on load:  "dtrain": {"kernel_name": "hid_w", "bias_name": "hid_b"}. Without it a
// layer's parameters are named as Keras names its weights: "<layer name>/kernel", ".../bias".
// The model's training defaults ride the same way, at the top level of the file, with the layer
// --hidden_units sizes (nn/model_spec.h):
//   "dtrain": {"defaults": {"optimizer": "sgd", "learning_rate": 0.5, "lr_decay_rate": 1,
//                           "moving_average_decay": 0.999, "epochs": 5},
//              "hidden_units": {"layer": "hidden", "fan_in_stddev": "softmax"}}
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "nn/model_spec.h"

namespace dtrain {

// Reads a Sequential model: {"class_name": "Sequential", "config": {"name", "layers": [...]}} (or
// Keras 2's older "config": [...]), also when wrapped as TensorFlow.js's "modelTopology" or
// "model_config". The input shape comes from an InputLayer (batch_input_shape, or Keras 3's
// batch_shape) or from the first layer's batch_input_shape (or Keras 3's build_config). A layer's
// index in messages is its position in the file's "layers" list, InputLayer included. The loss,
// where the file names one (Keras 3's "compile_config", Keras 2's and TensorFlow.js's
// "training_config"), goes to spec.loss; build_model checks it against the model's head. The
// top-level "dtrain" defaults go to spec.defaults as the file gives them (the run plan checks
// their keys and values against its flags: plan/recipes.h).
// Throws UsageError starting with source_name, e.g.
//   model.json: layer 3 (Conv2D): dilation_rate [2, 2] is not supported (only 1)
// Text whose arrays and objects nest deeper than kMaxJsonNesting (base/json_depth.h) is refused
// before it is parsed; a json value must come from text that was so bounded.
ModelSpec read_keras_json(std::string_view text, const std::string& source_name);
ModelSpec read_keras_json(const nlohmann::json& doc, const std::string& source_name);
// Text: a std::string converts to both of the above, so it gets its own overload.
inline ModelSpec read_keras_json(const std::string& text, const std::string& source_name) {
  return read_keras_json(std::string_view(text), source_name);
}

// Keras' preset initialisers ("GlorotUniform", ...): VarianceScaling with a fixed scale, mode and
// distribution. Read by name; written by name where an initialiser is one of them.
struct KerasPreset {
  const char* class_name;
  InitSpec init;
};
const std::vector<KerasPreset>& keras_presets();

}  // namespace dtrain
