// The model zoo: the MNIST models of the TensorFlow tutorials, with their variable names.
//   softmax          784→10                       w, b            ("MNIST for ML beginners")
//   mlp              784→hidden→10                hid_w, hid_b, sm_w, sm_b   (Kubeflow dist_mnist)
//   mnist_inference  784→500→10, L2 1e-4          layer1/weights, ... as hid_w/hid_b/sm_w/sm_b
//   lenet            conv5x5x32→pool→conv5x5x64→pool→dense 1024→dense 10   ("Deep MNIST")
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nn/model.h"

namespace dtrain {

struct ModelConfig {
  std::string name = "mnist_inference";
  int hidden_units = 100;   // mlp only
  std::optional<float> l2;  // overrides the model's own L2 coefficient
};

// REQUIRES: name is one of model_names(); otherwise throws UsageError listing them.
std::unique_ptr<Model> make_model(const ModelConfig& config);
const std::vector<std::string>& model_names();

}  // namespace dtrain
