// The optimizer a Keras or TensorFlow.js model file was compiled with, read into dtrain's terms:
// its flag names (without "--") and values, {"optimizer": "rmsprop", "learning_rate": 0.001,
// "rho": 0.9, ...}, with the framework's defaults filled in for what the file leaves out, so that
// a run honours it whole; or refused, naming the file, the optimizer and what dtrain has. Where
// files keep it:
//   Keras 3 (config.json of a .keras file): "compile_config": {"optimizer": {"module":
//     "keras.optimizers", "class_name": "RMSprop", "config": {"learning_rate": ..., "rho": ...}}}
//   Keras 2 (model.to_json() after compile, .h5's model_config attribute): "training_config":
//     {"optimizer_config": {"class_name": "RMSprop", "config": {...}}}, Keras' own keys
//   TensorFlow.js (model.json): "trainingConfig" (model.save) or "modelTopology": {
//     "training_config": ...} (tensorflowjs_converter), {"class_name": "RMSProp", "config":
//     {"learningRate": ..., "decay": ..., "momentum": ..., "epsilon": ..., "centered": ...}}
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace dtrain {

struct CompiledOptimizer {
  // Where the file said it, for messages: "training_config optimizer_config RMSprop".
  std::string origin;
  // dtrain flag names without "--" and their values; "optimizer" is always there.
  nlohmann::json settings = nlohmann::json::object();

  // The settings are the optimizer; where a file kept them is not.
  bool operator==(const CompiledOptimizer& other) const { return settings == other.settings; }
};

// The compiled optimizer of `level` (a file's top level, or the object a wrapper holds), if it
// names one. Throws UsageError starting with source_name for an optimizer or a setting dtrain does
// not implement: "m.json: compile_config optimizer Lion is not implemented (dtrain has SGD,
// RMSprop, Adam, AdamW, Adagrad, Nadam, Momentum)".
std::optional<CompiledOptimizer> read_compiled_optimizer(const nlohmann::json& level,
                                                         const std::string& source_name);

// Keras 3's form of it, {"module", "class_name", "config"}, which read_compiled_optimizer reads
// back to the same settings.
nlohmann::ordered_json keras_optimizer_json(const CompiledOptimizer& optimizer);

}  // namespace dtrain
