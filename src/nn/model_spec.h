// A model as data: the input shape and a list of layer specs, as a Keras Sequential model
// describes it (nn/keras_json.h reads and writes that JSON), and build_model(), which turns a spec
// into the layers and named parameters of a Model. The built-in models are such specs.
#pragma once

#include <array>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "nn/conv2d.h"
#include "nn/keras_optimizer.h"
#include "nn/model.h"
#include "nn/param_set.h"

namespace dtrain {

enum class LayerKind {
  kDense,
  kConv2D,
  kMaxPooling2D,
  kAveragePooling2D,
  kFlatten,
  kReshape,
  kDropout,
  kActivation,
  kBatchNormalization,
};

// Keras' activation names: linear, relu, tanh, sigmoid, softmax.
enum class ActivationKind { kLinear, kRelu, kTanh, kSigmoid, kSoftmax };

// One layer as Keras configures it. Fields a kind does not use keep their defaults.
struct LayerSpec {
  LayerKind kind = LayerKind::kDense;
  std::string name = {};  // Keras' layer name, e.g. "dense_1"

  // Dense and Conv2D.
  int units = 0;    // Dense
  int filters = 0;  // Conv2D
  ActivationKind activation = ActivationKind::kLinear;
  bool use_bias = true;
  InitSpec kernel_initializer = InitSpec::glorot_uniform();
  InitSpec bias_initializer = InitSpec::zeros();
  // Keras' L2 regulariser of the kernel: the loss gains kernel_l2·Σw² (no 1/2).
  double kernel_l2 = 0.0;
  // dtrain's parameter names; empty: Keras' own, "<name>/kernel" and "<name>/bias".
  std::string kernel_name = {};
  std::string bias_name = {};

  // Conv2D and the poolings: (rows, columns).
  std::array<int, 2> kernel_size = {0, 0};
  std::array<int, 2> pool_size = {2, 2};
  std::array<int, 2> strides = {1, 1};  // pooling: equal to pool_size unless the file says
  Padding padding = Padding::kValid;

  Shape target_shape = {};  // Reshape, without the batch
  float rate = 0.0f;        // Dropout

  // BatchNormalization (nn/batch_norm.h), Keras' defaults. axis is Keras' own: -1, or the index
  // of the last axis counting the batch (Keras 2 writes [3] after a Conv2D); any other is refused.
  int axis = -1;
  float momentum = 0.99f;
  float epsilon = 1e-3f;
  bool center = true;  // beta, named "<name>/beta"
  bool scale = true;   // gamma, named "<name>/gamma"
  InitSpec beta_initializer = InitSpec::zeros();
  InitSpec gamma_initializer = {.kind = InitKind::kOnes};
  InitSpec moving_mean_initializer = InitSpec::zeros();
  InitSpec moving_variance_initializer = {.kind = InitKind::kOnes};

  bool operator==(const LayerSpec&) const = default;
};

// The layer --hidden_units sizes, where a model's file declares one (the built-in mlp does):
//   "dtrain": {"hidden_units": {"layer": "hidden", "fan_in_stddev": "softmax"}}
// The Dense layer `layer` gets --hidden_units units (default 100), and the Dense layer
// `fan_in_stddev`, if named, which takes them as its fan-in, a kernel stddev of 1/sqrt(fan-in), as
// dist_mnist draws it.
struct HiddenUnitsLayer {
  std::string layer = {};
  std::string fan_in_stddev = {};  // empty: no initialiser follows the width

  bool operator==(const HiddenUnitsLayer&) const = default;
};

struct ModelSpec {
  std::string name = {};
  Shape input_shape = {};  // without the batch
  std::vector<LayerSpec> layers = {};
  // The loss the Keras file was compiled with, where it says ("binary_crossentropy",
  // "sparse_categorical_crossentropy", "categorical_crossentropy"); empty: the head decides.
  std::string loss = {};
  // The training settings the file recommends where no flag says otherwise, as it gives them:
  // flag names without "--" and their values (the built-in models give their tutorials' recipes).
  // The run plan reads them (plan/recipes.h); here they are only carried.
  nlohmann::json defaults = nlohmann::json::object();
  std::optional<HiddenUnitsLayer> hidden_units = std::nullopt;  // none: --hidden_units is refused
  // The optimizer the file was compiled with (nn/keras_optimizer.h), which the run plan honours
  // unless --optimizer says otherwise; none: the recipe's, then the flags' defaults.
  std::optional<CompiledOptimizer> optimizer = std::nullopt;

  bool operator==(const ModelSpec&) const = default;
};

struct BuildOptions {
  // Replaces the L2 coefficient of every kernel, in TensorFlow's l2_regularizer convention
  // (l2·Σw²/2): the --l2 flag of the built-in models.
  std::optional<float> l2;
  ConvImplementation conv_implementation = ConvImplementation::kAuto;  // of every Conv2D
  // The most memory the model may need (nn/model_plan.h), as a machine of that size; nullopt:
  // what this process may allocate here (base/machine_memory.h: allocation_limit).
  std::optional<uint64_t> memory_limit_bytes = std::nullopt;
};

// Builds the layers of a spec. Dense and Conv2D with an activation become the layer and an
// activation layer; a linear activation adds nothing. The model ends at logits, since its loss
// applies the last activation: a softmax that ends the model (an activation of the last layer, or
// a trailing Activation layer) is dropped and the loss is softmax cross-entropy, and a softmax
// anywhere else is refused. A sigmoid that ends the model on one value (Dense(1,
// activation="sigmoid")) is a binary head: it is dropped too and the loss is binary
// cross-entropy. spec.loss, when given, must agree with the head.
// The spec's shapes and sizes are checked by plan_model (nn/model_plan.h) before any layer is
// built. Throws UsageError naming `source`, the layer's index in spec.layers and the problem (a
// Dense on a non-flat input, a Reshape of the wrong size, a window that does not fit), and
// TooLargeError for a model that needs more memory than options.memory_limit_bytes.
std::unique_ptr<Model> build_model(const ModelSpec& spec, const BuildOptions& options = {},
                                   const std::string& source = "model");

// Keras' name of a layer kind ("Dense", "MaxPooling2D", ...) and of an activation ("relu", ...).
constexpr const char* keras_class_name(LayerKind kind) {
  switch (kind) {
    case LayerKind::kDense:
      return "Dense";
    case LayerKind::kConv2D:
      return "Conv2D";
    case LayerKind::kMaxPooling2D:
      return "MaxPooling2D";
    case LayerKind::kAveragePooling2D:
      return "AveragePooling2D";
    case LayerKind::kFlatten:
      return "Flatten";
    case LayerKind::kReshape:
      return "Reshape";
    case LayerKind::kDropout:
      return "Dropout";
    case LayerKind::kActivation:
      return "Activation";
    case LayerKind::kBatchNormalization:
      return "BatchNormalization";
  }
  return "?";
}

constexpr const char* activation_name(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::kLinear:
      return "linear";
    case ActivationKind::kRelu:
      return "relu";
    case ActivationKind::kTanh:
      return "tanh";
    case ActivationKind::kSigmoid:
      return "sigmoid";
    case ActivationKind::kSoftmax:
      return "softmax";
  }
  return "?";
}

}  // namespace dtrain
