// Keras Sequential JSON writer: a spec as Keras 3 writes it.
#include "nn/keras_json_writer.h"

#include <fmt/format.h>

#include <string>
#include <utility>

#include "nn/keras_json.h"

namespace dtrain {

using ordered_json = nlohmann::ordered_json;

namespace {

// A float as its shortest decimal, so 0.1f is written 0.1 and reads back as 0.1f.
ordered_json json_float(float v) { return std::stod(fmt::format("{}", v)); }

ordered_json keras_object(const char* module, const std::string& class_name, ordered_json config) {
  return {{"module", module},
          {"class_name", class_name},
          {"config", std::move(config)},
          {"registered_name", nullptr}};
}

const char* mode_name(FanMode mode) {
  switch (mode) {
    case FanMode::kFanIn:
      return "fan_in";
    case FanMode::kFanOut:
      return "fan_out";
    case FanMode::kFanAvg:
      return "fan_avg";
  }
  return "?";
}

const char* distribution_name(Distribution d) {
  switch (d) {
    case Distribution::kTruncatedNormal:
      return "truncated_normal";
    case Distribution::kUntruncatedNormal:
      return "untruncated_normal";
    case Distribution::kUniform:
      return "uniform";
  }
  return "?";
}

ordered_json initializer_json(const InitSpec& init) {
  const char* module = "keras.initializers";
  switch (init.kind) {
    case InitKind::kZeros:
      return keras_object(module, "Zeros", ordered_json::object());
    case InitKind::kOnes:
      return keras_object(module, "Ones", ordered_json::object());
    case InitKind::kConstant:
      return keras_object(module, "Constant", {{"value", json_float(init.value)}});
    case InitKind::kRandomNormal:
    case InitKind::kTruncatedNormal:
      return keras_object(module,
                          init.kind == InitKind::kRandomNormal ? "RandomNormal" : "TruncatedNormal",
                          {{"mean", json_float(init.mean)},
                           {"stddev", json_float(init.stddev)},
                           {"seed", nullptr}});
    case InitKind::kRandomUniform:
      return keras_object(module, "RandomUniform",
                          {{"minval", json_float(init.minval)},
                           {"maxval", json_float(init.maxval)},
                           {"seed", nullptr}});
    case InitKind::kVarianceScaling:
      break;
  }
  for (const KerasPreset& preset : keras_presets()) {
    if (preset.init == init) return keras_object(module, preset.class_name, {{"seed", nullptr}});
  }
  return keras_object(module, "VarianceScaling",
                      {{"scale", json_float(init.scale)},
                       {"mode", mode_name(init.mode)},
                       {"distribution", distribution_name(init.distribution)},
                       {"seed", nullptr}});
}

ordered_json pair_json(const std::array<int, 2>& p) { return ordered_json::array({p[0], p[1]}); }

ordered_json shape_json(const Shape& shape) {
  ordered_json out = ordered_json::array({nullptr});
  for (int64_t d : shape) out.push_back(d);
  return out;
}

// The keys Dense and Conv2D share, after their own.
void add_kernel_options(const LayerSpec& layer, ordered_json& config) {
  config["activation"] = activation_name(layer.activation);
  config["use_bias"] = layer.use_bias;
  config["kernel_initializer"] = initializer_json(layer.kernel_initializer);
  config["bias_initializer"] = initializer_json(layer.bias_initializer);
  config["kernel_regularizer"] =
      layer.kernel_l2 > 0 ? keras_object("keras.regularizers", "L2", {{"l2", layer.kernel_l2}})
                          : ordered_json(nullptr);
  config["bias_regularizer"] = nullptr;
  config["kernel_constraint"] = nullptr;
  config["bias_constraint"] = nullptr;
  if (!layer.kernel_name.empty() || !layer.bias_name.empty()) {
    ordered_json names = ordered_json::object();
    if (!layer.kernel_name.empty()) names["kernel_name"] = layer.kernel_name;
    if (!layer.bias_name.empty()) names["bias_name"] = layer.bias_name;
    config["dtrain"] = std::move(names);
  }
}

ordered_json layer_json(const LayerSpec& layer) {
  ordered_json config = {{"name", layer.name}, {"trainable", true}, {"dtype", "float32"}};
  switch (layer.kind) {
    case LayerKind::kDense:
      config["units"] = layer.units;
      add_kernel_options(layer, config);
      break;
    case LayerKind::kConv2D:
      config["filters"] = layer.filters;
      config["kernel_size"] = pair_json(layer.kernel_size);
      config["strides"] = pair_json(layer.strides);
      config["padding"] = layer.padding == Padding::kSame ? "same" : "valid";
      config["data_format"] = "channels_last";
      config["dilation_rate"] = pair_json({1, 1});
      config["groups"] = 1;
      add_kernel_options(layer, config);
      break;
    case LayerKind::kMaxPooling2D:
    case LayerKind::kAveragePooling2D:
      config["pool_size"] = pair_json(layer.pool_size);
      config["strides"] = pair_json(layer.strides);
      config["padding"] = layer.padding == Padding::kSame ? "same" : "valid";
      config["data_format"] = "channels_last";
      break;
    case LayerKind::kFlatten:
      config["data_format"] = "channels_last";
      break;
    case LayerKind::kReshape:
      config["target_shape"] = layer.target_shape;
      break;
    case LayerKind::kDropout:
      config["rate"] = json_float(layer.rate);
      config["seed"] = nullptr;
      config["noise_shape"] = nullptr;
      break;
    case LayerKind::kActivation:
      config["activation"] = activation_name(layer.activation);
      break;
    case LayerKind::kBatchNormalization:
      config["axis"] = layer.axis;
      config["momentum"] = json_float(layer.momentum);
      config["epsilon"] = json_float(layer.epsilon);
      config["center"] = layer.center;
      config["scale"] = layer.scale;
      config["beta_initializer"] = initializer_json(layer.beta_initializer);
      config["gamma_initializer"] = initializer_json(layer.gamma_initializer);
      config["moving_mean_initializer"] = initializer_json(layer.moving_mean_initializer);
      config["moving_variance_initializer"] = initializer_json(layer.moving_variance_initializer);
      for (const char* key :
           {"beta_regularizer", "gamma_regularizer", "beta_constraint", "gamma_constraint"})
        config[key] = nullptr;
      config["synchronized"] = false;
      break;
  }
  return keras_object("keras.layers", keras_class_name(layer.kind), std::move(config));
}

}  // namespace

nlohmann::ordered_json to_keras_json(const ModelSpec& spec) {
  ordered_json layers = ordered_json::array();
  layers.push_back(keras_object("keras.layers", "InputLayer",
                                {{"batch_shape", shape_json(spec.input_shape)},
                                 {"dtype", "float32"},
                                 {"sparse", false},
                                 {"name", "input_layer"}}));
  for (const LayerSpec& layer : spec.layers) layers.push_back(layer_json(layer));
  ordered_json model = keras_object(
      "keras", "Sequential",
      {{"name", spec.name}, {"trainable", true}, {"dtype", "float32"}, {"layers", layers}});
  model["build_config"] = {{"input_shape", shape_json(spec.input_shape)}};
  if (!spec.loss.empty()) model["compile_config"] = {{"loss", spec.loss}};
  if (spec.optimizer) model["compile_config"]["optimizer"] = keras_optimizer_json(*spec.optimizer);
  ordered_json dtrain = ordered_json::object();
  if (spec.defaults.is_object() && !spec.defaults.empty())
    dtrain["defaults"] = ordered_json::parse(spec.defaults.dump());
  if (spec.hidden_units) {
    ordered_json sized = {{"layer", spec.hidden_units->layer}};
    if (!spec.hidden_units->fan_in_stddev.empty())
      sized["fan_in_stddev"] = spec.hidden_units->fan_in_stddev;
    dtrain["hidden_units"] = std::move(sized);
  }
  if (!dtrain.empty()) model["dtrain"] = std::move(dtrain);
  return model;
}

}  // namespace dtrain
