// The model zoo: the MNIST models of the TensorFlow tutorials, shipped as Keras JSON specs
// (src/nn/models/), with their variable names, initialisers and L2. --model may also name a
// Keras JSON file of one's own.
//   softmax          784→10                       w, b            ("MNIST for ML beginners")
//   mlp              784→hidden→10                hid_w, hid_b, sm_w, sm_b   (Kubeflow dist_mnist)
//   mnist_inference  784→500→10, L2 1e-4          layer1/weights, layer1/biases, layer2/...
//   lenet            conv5x5x32→pool→conv5x5x64→pool→dense 1024→dense 10   ("Deep MNIST")
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "nn/conv_kernels.h"
#include "nn/model.h"
#include "nn/model_spec.h"

namespace dtrain {

struct ModelConfig {
  // One of model_names(), or the path of a Keras Sequential JSON file (ending in .json).
  std::string name = "mnist_inference";
  int hidden_units = 100;  // of the layer the spec declares for it (mlp's); see HiddenUnitsLayer
  // Overrides the L2 coefficient of every kernel, in TensorFlow's l2_regularizer convention
  // (loss += l2·Σw²/2).
  std::optional<float> l2 = std::nullopt;
  // Which implementation the Conv2D layers run (`dtrain bench train --conv_kernels`).
  ConvImplementation conv_kernels = ConvImplementation::kAuto;
  // The spec `name` stands for, read once by resolve_model() (a built-in model's JSON, or the
  // file's) and shared by every copy of the config, so that a task that builds the model, checks
  // it, fingerprints it and saves it in checkpoints reads the user's file once. hidden_units and l2
  // are applied to it where it is used. Null: read from `name` at each use (tests that fill a
  // config by hand). REQUIRES: name is not changed once it is set.
  std::shared_ptr<const ModelSpec> source = nullptr;
};

// How messages about the spec `name` stands for name its source: the file's path, or "built-in
// model lenet".
std::string model_source_name(const std::string& name);

// Reads the spec `config.name` stands for into config.source; throws as model_spec() does.
void resolve_model(ModelConfig& config);

// The spec of the configured model: config.source (or, when null, the built-in model or the file
// `name` stands for), with hidden_units and l2 applied. Throws UsageError listing model_names()
// for an unknown name, and UsageError or IoError naming the file for a .json that cannot be read
// or is refused.
ModelSpec model_spec(const ModelConfig& config);

// build_model(model_spec(config)).
std::unique_ptr<Model> make_model(const ModelConfig& config);

// The Keras JSON of model_spec(config), which a checkpoint stores so that it rebuilds its model
// with make_model_from_json().
nlohmann::ordered_json model_spec_json(const ModelConfig& config);
std::unique_ptr<Model> make_model_from_json(const nlohmann::json& keras_json);

const std::vector<std::string>& model_names();

}  // namespace dtrain
