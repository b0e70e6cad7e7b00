// build_model: a ModelSpec's layers, shape by shape, into a Model.
#include "nn/model_spec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>
#include <stdexcept>

#include "base/error.h"
#include "base/machine_memory.h"
#include "nn/activation.h"
#include "nn/batch_norm.h"
#include "nn/dense.h"
#include "nn/dropout.h"
#include "nn/model_plan.h"
#include "nn/pool2d.h"

namespace dtrain {
namespace {

using Layers = std::vector<std::unique_ptr<Layer>>;

// The layers of one spec, appended while the current shape is tracked. The plan checked the shapes
// and sizes first, so every dimension fits an int (the casts below are exact) and nothing here
// allocates beyond the memory limit; a layer whose shape differs from its plan is a bug here.
class Builder {
 public:
  Builder(const ModelSpec& spec, const BuildOptions& options, const std::string& source)
      : spec_(spec),
        options_(options),
        source_(source),
        plan_(plan_model(spec,
                         options.memory_limit_bytes
                             ? machine_allocation_limit(*options.memory_limit_bytes)
                             : allocation_limit(),
                         source)),
        shape_(spec.input_shape) {}

  std::unique_ptr<Model> build() {
    for (index_ = 0; index_ < spec_.layers.size(); ++index_) {
      try {
        add(spec_.layers[index_]);
      } catch (const UsageError&) {
        throw;
      } catch (const Error& e) {
        fail(e.what());
      }
      if (shape_ != plan_.layers[index_].output_shape) {
        throw std::logic_error(
            fmt::format("{}: layer {} was planned with output shape {} but "
                        "built with {}",
                        source_, index_, shape_string(plan_.layers[index_].output_shape),
                        shape_string(shape_)));
      }
    }
    return std::make_unique<Model>(spec_.name, std::move(layers_), loss());
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    const LayerSpec& layer = spec_.layers[index_];
    throw UsageError(fmt::format("{}: layer {} ({} '{}'): {}", source_, index_,
                                 keras_class_name(layer.kind), layer.name, what));
  }

  bool is_last() const { return index_ + 1 == spec_.layers.size(); }

  // The head's loss, checked against the one the file was compiled with.
  Loss loss() const {
    const std::string& named = spec_.loss;
    if (named.empty()) return binary_head_ ? Loss::kBinaryCrossEntropy : Loss::kSoftmaxCrossEntropy;
    if (named == "binary_crossentropy") {
      if (binary_head_) return Loss::kBinaryCrossEntropy;
      throw UsageError(
          fmt::format("{}: loss binary_crossentropy needs a binary head: end the model in Dense(1, "
                      "activation=\"sigmoid\")",
                      source_));
    }
    if (named == "sparse_categorical_crossentropy" || named == "categorical_crossentropy") {
      if (!binary_head_) return Loss::kSoftmaxCrossEntropy;
      throw UsageError(fmt::format(
          "{}: loss {} does not fit the model's binary head (one sigmoid output): compile it with "
          "binary_crossentropy, or end it in Dense(2, activation=\"softmax\")",
          source_, named));
    }
    throw UsageError(fmt::format(
        "{}: loss {} is not supported (only binary_crossentropy, sparse_categorical_crossentropy "
        "or categorical_crossentropy)",
        source_, named));
  }

  std::string param_name(const std::string& given, const LayerSpec& layer,
                         const char* keras_suffix) {
    std::string name = given.empty() ? fmt::format("{}/{}", layer.name, keras_suffix) : given;
    if (!names_.insert(name).second) fail(fmt::format("parameter name '{}' is used twice", name));
    return name;
  }

  float kernel_l2(const LayerSpec& layer) const {
    // Keras' L2(x) adds x·Σw² to the loss: l2 = 2x in TensorFlow's convention (l2·Σw²/2).
    return options_.l2 ? *options_.l2 : static_cast<float>(2.0 * layer.kernel_l2);
  }

  void add(const LayerSpec& layer) {
    switch (layer.kind) {
      case LayerKind::kDense:
        add_dense(layer);
        break;
      case LayerKind::kConv2D:
        add_conv(layer);
        break;
      case LayerKind::kMaxPooling2D:
      case LayerKind::kAveragePooling2D:
        add_pool(layer);
        break;
      case LayerKind::kFlatten:
        push(std::make_unique<Flatten>(shape_));
        break;
      case LayerKind::kReshape:
        push(std::make_unique<Reshape>(shape_, plan_.layers[index_].output_shape));
        break;
      case LayerKind::kDropout:
        push(std::make_unique<Dropout>(shape_, layer.rate));
        break;
      case LayerKind::kActivation:
        add_activation(layer.activation);
        break;
      case LayerKind::kBatchNormalization:
        add_batch_norm(layer);
        break;
    }
  }

  void push(std::unique_ptr<Layer> layer) {
    shape_ = layer->output_shape();
    layers_.push_back(std::move(layer));
  }

  void add_dense(const LayerSpec& layer) {
    push(std::make_unique<Dense>(
        DenseOptions{.in_features = static_cast<int>(shape_[0]),
                     .out_features = layer.units,
                     .weight_name = param_name(layer.kernel_name, layer, "kernel"),
                     .bias_name = layer.use_bias ? param_name(layer.bias_name, layer, "bias") : "",
                     .weight_init = layer.kernel_initializer,
                     .bias_init = layer.bias_initializer,
                     .weight_l2 = kernel_l2(layer)}));
    add_activation(layer.activation);
  }

  void add_conv(const LayerSpec& layer) {
    push(std::make_unique<Conv2D>(
        Conv2DOptions{.height = static_cast<int>(shape_[0]),
                      .width = static_cast<int>(shape_[1]),
                      .in_channels = static_cast<int>(shape_[2]),
                      .out_channels = layer.filters,
                      .kernel_height = layer.kernel_size[0],
                      .kernel_width = layer.kernel_size[1],
                      .stride_height = layer.strides[0],
                      .stride_width = layer.strides[1],
                      .padding = layer.padding,
                      .weight_name = param_name(layer.kernel_name, layer, "kernel"),
                      .bias_name = layer.use_bias ? param_name(layer.bias_name, layer, "bias") : "",
                      .weight_init = layer.kernel_initializer,
                      .bias_init = layer.bias_initializer,
                      .weight_l2 = kernel_l2(layer),
                      .implementation = options_.conv_implementation}));
    add_activation(layer.activation);
  }

  void add_batch_norm(const LayerSpec& layer) {
    push(std::make_unique<BatchNorm>(
        BatchNormOptions{.shape = shape_,
                         .momentum = layer.momentum,
                         .epsilon = layer.epsilon,
                         .gamma_name = layer.scale ? param_name("", layer, "gamma") : "",
                         .beta_name = layer.center ? param_name("", layer, "beta") : "",
                         .moving_mean_name = param_name("", layer, "moving_mean"),
                         .moving_variance_name = param_name("", layer, "moving_variance"),
                         .gamma_init = layer.gamma_initializer,
                         .beta_init = layer.beta_initializer,
                         .moving_mean_init = layer.moving_mean_initializer,
                         .moving_variance_init = layer.moving_variance_initializer}));
  }

  void add_pool(const LayerSpec& layer) {
    const Pool2DOptions options{.height = static_cast<int>(shape_[0]),
                                .width = static_cast<int>(shape_[1]),
                                .channels = static_cast<int>(shape_[2]),
                                .pool_height = layer.pool_size[0],
                                .pool_width = layer.pool_size[1],
                                .stride_height = layer.strides[0],
                                .stride_width = layer.strides[1],
                                .padding = layer.padding};
    if (layer.kind != LayerKind::kMaxPooling2D) {
      push(std::make_unique<AveragePool2D>(options));
    } else if (!layers_.empty() && dynamic_cast<const Relu*>(layers_.back().get()) != nullptr) {
      // ReLU then max pooling is max pooling then ReLU: ReLU is monotone, so the window's first
      // maximum is the same input either way, and its gradient is masked by the same sign. Run
      // in that order, ReLU touches a quarter of the values (2x2 windows) in both passes.
      layers_.pop_back();
      push(std::make_unique<MaxPool2D>(options));
      push(std::make_unique<Relu>(shape_));
    } else {
      push(std::make_unique<MaxPool2D>(options));
    }
  }

  void add_activation(ActivationKind kind) {
    switch (kind) {
      case ActivationKind::kLinear:
        return;
      case ActivationKind::kRelu:
        return push(std::make_unique<Relu>(shape_));
      case ActivationKind::kTanh:
        return push(std::make_unique<Tanh>(shape_));
      case ActivationKind::kSigmoid:
        // A binary head: binary cross-entropy applies the sigmoid to the logit.
        if (is_last() && num_elements(shape_) == 1) {
          binary_head_ = true;
          return;
        }
        return push(std::make_unique<Sigmoid>(shape_));
      case ActivationKind::kSoftmax:
        // The loss applies it: softmax cross-entropy takes logits.
        if (is_last()) return;
        fail(
            "softmax is only supported as the model's last activation (the loss applies it to "
            "the logits)");
    }
  }

  const ModelSpec& spec_;
  const BuildOptions& options_;
  const std::string& source_;
  const ModelPlan plan_;
  Shape shape_;
  size_t index_ = 0;
  Layers layers_;
  std::set<std::string> names_;
  bool binary_head_ = false;
};

}  // namespace

std::unique_ptr<Model> build_model(const ModelSpec& spec, const BuildOptions& options,
                                   const std::string& source) {
  return Builder(spec, options, source).build();
}

}  // namespace dtrain
