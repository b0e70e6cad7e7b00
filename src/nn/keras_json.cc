// Keras Sequential JSON reader. Each layer's config is read through an OptionReader
// (nn/keras_options.h) that records the keys it used; whatever is left must be a Keras default
// (null, name, trainable true, float32 ...), or the layer is refused with the key and its value.
#include "nn/keras_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/json_depth.h"
#include "base/json_error.h"
#include "nn/keras_options.h"

namespace dtrain {
namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

using keras::show;
using keras::unwrap;

// The dims after the batch of a [null, d1, d2, ...] shape.
Shape batch_shape(const json& wrapped, OptionReader& reader, const std::string& key) {
  const json& v = unwrap(wrapped);
  Shape shape;
  if (!v.is_array() || v.size() < 2) reader.unsupported(key, v, "[null, d1, ...]");
  for (size_t i = 1; i < v.size(); ++i) {
    if (!v[i].is_number_integer() || v[i].get<int64_t>() <= 0)
      reader.fail(fmt::format("{} {} is not a shape of positive sizes", key, show(v)));
    shape.push_back(v[i].get<int64_t>());
  }
  return shape;
}

std::optional<Shape> declared_input_shape(const json& layer, const json& config,
                                          OptionReader& reader) {
  for (const char* key : {"batch_input_shape", "batch_shape"}) {
    if (config.contains(key) && !config[key].is_null())
      return batch_shape(config[key], reader, key);
  }
  if (layer.contains("build_config") && layer["build_config"].is_object() &&
      layer["build_config"].contains("input_shape"))
    return batch_shape(layer["build_config"]["input_shape"], reader, "build_config input_shape");
  return std::nullopt;
}

void read_names(const json& config, LayerSpec& spec, OptionReader& reader) {
  if (!config.contains("dtrain")) return;
  const json& d = config["dtrain"];
  if (!d.is_object()) reader.fail(fmt::format("dtrain {} is not an object", show(d)));
  for (const auto& [key, value] : d.items()) {
    if (key != "kernel_name" && key != "bias_name")
      reader.fail(
          fmt::format("dtrain option {} is not supported (only kernel_name, bias_name)", key));
    if (!value.is_string() || value.get<std::string>().empty())
      reader.fail(fmt::format("dtrain {} {} is not a name", key, show(value)));
  }
  spec.kernel_name = d.value("kernel_name", "");
  spec.bias_name = d.value("bias_name", "");
}

// Keras 2 writes the axis as a list once the layer is built ([3] after a Conv2D), Keras 3 as -1.
int batch_norm_axis(const json& config, OptionReader& r) {
  if (!config.contains("axis")) return -1;
  const json& given = r.get("axis");
  const json& v = given.is_array() && given.size() == 1 ? given[0] : given;
  if (!v.is_number_integer() || (v.get<int64_t>() != -1 && v.get<int64_t>() <= 0) ||
      v.get<int64_t>() > 64)
    r.unsupported("axis", given, "the last axis, -1");
  return v.get<int>();
}

void read_batch_norm(LayerSpec& spec, const json& config, OptionReader& r) {
  spec.kind = LayerKind::kBatchNormalization;
  spec.axis = batch_norm_axis(config, r);
  spec.momentum = r.bounded_number("momentum", 0.99f, 0.0, 1.0, /*lo_open=*/false);
  spec.epsilon = r.bounded_number("epsilon", 1e-3f, 0.0, 1e30, /*lo_open=*/true);
  spec.center = r.boolean("center", true);
  spec.scale = r.boolean("scale", true);
  spec.beta_initializer = r.initializer("beta_initializer", InitSpec::zeros());
  spec.gamma_initializer = r.initializer("gamma_initializer", InitSpec{.kind = InitKind::kOnes});
  spec.moving_mean_initializer = r.initializer("moving_mean_initializer", InitSpec::zeros());
  spec.moving_variance_initializer =
      r.initializer("moving_variance_initializer", InitSpec{.kind = InitKind::kOnes});
  // Batch renormalisation (Keras 2) and statistics synchronised across replicas (Keras 3) change
  // what training computes; each worker here normalises by its own batch.
  if (r.boolean("renorm", false)) r.unsupported("renorm", true, "false");
  if (r.boolean("synchronized", false)) {
    r.unsupported("synchronized", true,
                  "false: each worker normalises by its own batch, and the moving statistics are "
                  "averaged over the workers");
  }
  // Options of renorm, and Keras 2's choice of kernel, which computes the same.
  for (const char* key : {"renorm_clipping", "renorm_momentum", "fused"}) r.ignore(key);
  r.check_rest();
}

LayerSpec read_layer(const std::string& class_name, const json& config, OptionReader& r) {
  LayerSpec spec;
  if (config.contains("name") && config["name"].is_string()) spec.name = config["name"];
  const json one = 1, pair_of_ones = json::array({1, 1});
  if (class_name == "Dense") {
    spec.kind = LayerKind::kDense;
    spec.units = r.positive_int("units");
    spec.activation = r.activation("activation");
    spec.use_bias = r.boolean("use_bias", true);
    spec.kernel_initializer = r.initializer("kernel_initializer", InitSpec::glorot_uniform());
    spec.bias_initializer = r.initializer("bias_initializer", InitSpec::zeros());
    spec.kernel_l2 = r.kernel_l2();
    read_names(config, spec, r);
    r.check_rest();
  } else if (class_name == "Conv2D") {
    spec.kind = LayerKind::kConv2D;
    spec.filters = r.positive_int("filters");
    spec.kernel_size = r.pair("kernel_size");
    spec.strides = config.contains("strides") ? r.pair("strides") : std::array<int, 2>{1, 1};
    spec.padding = r.padding();
    spec.activation = r.activation("activation");
    spec.use_bias = r.boolean("use_bias", true);
    spec.kernel_initializer = r.initializer("kernel_initializer", InitSpec::glorot_uniform());
    spec.bias_initializer = r.initializer("bias_initializer", InitSpec::zeros());
    spec.kernel_l2 = r.kernel_l2();
    read_names(config, spec, r);
    r.check_rest({{"dilation_rate", pair_of_ones}, {"groups", one}});
  } else if (class_name == "MaxPooling2D" || class_name == "AveragePooling2D") {
    spec.kind =
        class_name == "MaxPooling2D" ? LayerKind::kMaxPooling2D : LayerKind::kAveragePooling2D;
    spec.pool_size = config.contains("pool_size") ? r.pair("pool_size") : std::array<int, 2>{2, 2};
    spec.strides = r.has("strides") ? r.pair("strides") : spec.pool_size;
    spec.padding = r.padding();
    r.check_rest();
  } else if (class_name == "Flatten") {
    spec.kind = LayerKind::kFlatten;
    r.check_rest();
  } else if (class_name == "Reshape") {
    spec.kind = LayerKind::kReshape;
    const json& target = r.get("target_shape");
    if (!target.is_array() || target.empty())
      r.fail(fmt::format("target_shape {} is not a shape", show(target)));
    for (const json& d : target) {
      if (!d.is_number_integer() || (d.get<int64_t>() <= 0 && d.get<int64_t>() != -1))
        r.fail(fmt::format("target_shape {} is not a shape", show(target)));
      spec.target_shape.push_back(d.get<int64_t>());
    }
    r.check_rest();
  } else if (class_name == "Dropout") {
    spec.kind = LayerKind::kDropout;
    const json& rate = r.get("rate");
    if (!rate.is_number() || rate.get<double>() < 0 || rate.get<double>() >= 1)
      r.fail(fmt::format("rate {} is not in [0, 1)", show(rate)));
    spec.rate = static_cast<float>(rate.get<double>());
    r.check_rest();
  } else if (class_name == "Activation") {
    spec.kind = LayerKind::kActivation;
    spec.activation = r.activation("activation");
    r.check_rest();
  } else if (class_name == "BatchNormalization") {
    read_batch_norm(spec, config, r);
  } else {
    r.fail(
        "this layer class is not supported (only InputLayer, Dense, Conv2D, MaxPooling2D, "
        "AveragePooling2D, Flatten, Reshape, Dropout, Activation, BatchNormalization)");
  }
  return spec;
}

// Keras' default layer name when a file gives none: "dense", "dense_1", ...
std::string default_name(const LayerSpec& spec, std::set<std::string>& taken) {
  std::string base;
  for (char c : std::string(keras_class_name(spec.kind))) {
    if (std::isupper(static_cast<unsigned char>(c)) && !base.empty() &&
        !std::isdigit(static_cast<unsigned char>(base.back())) && base.back() != '_')
      base += '_';
    base += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  std::string name = base;
  for (int i = 1; taken.contains(name); ++i) name = fmt::format("{}_{}", base, i);
  return name;
}

ModelSpec read_sequential(const nlohmann::json& input, const std::string& source_name);

}  // namespace

const std::vector<KerasPreset>& keras_presets() {
  static const std::vector<KerasPreset> table = {
      {"GlorotUniform", InitSpec::variance_scaling(1.0f, FanMode::kFanAvg, Distribution::kUniform)},
      {"GlorotNormal",
       InitSpec::variance_scaling(1.0f, FanMode::kFanAvg, Distribution::kTruncatedNormal)},
      {"HeNormal",
       InitSpec::variance_scaling(2.0f, FanMode::kFanIn, Distribution::kTruncatedNormal)},
      {"HeUniform", InitSpec::variance_scaling(2.0f, FanMode::kFanIn, Distribution::kUniform)},
      {"LecunNormal",
       InitSpec::variance_scaling(1.0f, FanMode::kFanIn, Distribution::kTruncatedNormal)},
      {"LecunUniform", InitSpec::variance_scaling(1.0f, FanMode::kFanIn, Distribution::kUniform)},
  };
  return table;
}

ModelSpec read_keras_json(std::string_view text, const std::string& source_name) {
  // Before parsing: every later copy, comparison and message of a value recurses once per level.
  if (const std::optional<size_t> at = find_json_nesting_beyond(text, kMaxJsonNesting)) {
    throw UsageError(fmt::format("{}: {}: arrays and objects nest deeper than {} levels",
                                 source_name, describe_position(text, *at), kMaxJsonNesting));
  }
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    throw UsageError(
        fmt::format("{}: not valid JSON: {}", source_name, describe_json_error(text, e)));
  }
  return read_keras_json(doc, source_name);
}

ModelSpec read_keras_json(const nlohmann::json& input, const std::string& source_name) {
  try {
    return read_sequential(input, source_name);
  } catch (const json::exception& e) {
    // A value of the wrong JSON type where the reader expected another (a numeric "mode").
    throw UsageError(fmt::format("{}: not a Keras model ({})", source_name, e.what()));
  }
}

namespace {

// The loss a file was compiled with: Keras 3's "compile_config" (config.json of a .keras file),
// or Keras 2's and TensorFlow.js's "training_config", beside the model's config; "" for none.
// A loss object ({"class_name": "BinaryCrossentropy", ...}) is named as its function.
std::string compiled_loss(const json& level, const std::string& source_name) {
  for (const char* key : {"compile_config", "training_config"}) {
    if (!level.is_object() || !level.contains(key) || !level[key].is_object()) continue;
    const json& config = level[key];
    if (!config.contains("loss") || config["loss"].is_null()) continue;
    const json& loss = config["loss"];
    if (loss.is_string()) return loss.get<std::string>();
    const std::string class_name = loss.is_object() ? loss.value("class_name", "") : "";
    const json options = loss.is_object() ? loss.value("config", json::object()) : json::object();
    if (options.is_object() && options.value("from_logits", false) == true) {
      throw UsageError(
          fmt::format("{}: {} loss {} with from_logits true is not supported (end the model in its "
                      "activation: sigmoid or softmax)",
                      source_name, key, show(loss)));
    }
    if (class_name == "BinaryCrossentropy") return "binary_crossentropy";
    if (class_name == "SparseCategoricalCrossentropy") return "sparse_categorical_crossentropy";
    if (class_name == "CategoricalCrossentropy") return "categorical_crossentropy";
    throw UsageError(
        fmt::format("{}: {} loss {} is not supported (only binary_crossentropy, "
                    "sparse_categorical_crossentropy or categorical_crossentropy)",
                    source_name, key, show(loss)));
  }
  return "";
}

// The Dense layer of `spec` named `name`, or UsageError naming the file and the key.
const LayerSpec& dense_layer(const ModelSpec& spec, const json& name, const std::string& key,
                             const std::string& source_name) {
  for (const LayerSpec& layer : spec.layers) {
    if (name.is_string() && layer.name == name.get<std::string>() &&
        layer.kind == LayerKind::kDense) {
      return layer;
    }
  }
  throw UsageError(fmt::format("{}: dtrain hidden_units {} {} is not the name of a Dense layer",
                               source_name, key, show(name)));
}

HiddenUnitsLayer read_hidden_units(const json& given, const ModelSpec& spec,
                                   const std::string& source_name) {
  if (!given.is_object() || !given.contains("layer")) {
    throw UsageError(fmt::format("{}: dtrain hidden_units {} is not {{\"layer\": NAME}}",
                                 source_name, show(given)));
  }
  HiddenUnitsLayer sized;
  for (const auto& [key, value] : given.items()) {
    if (key != "layer" && key != "fan_in_stddev") {
      throw UsageError(
          fmt::format("{}: dtrain hidden_units {} is not supported (only layer, fan_in_stddev)",
                      source_name, key));
    }
    const LayerSpec& layer = dense_layer(spec, value, key, source_name);
    (key == "layer" ? sized.layer : sized.fan_in_stddev) = layer.name;
  }
  return sized;
}

// The top-level "dtrain" key: the training defaults (checked by the run plan, which knows the
// flags they name), and the layer --hidden_units sizes.
void read_dtrain(const json& level, const std::string& source_name, ModelSpec& spec) {
  if (!level.is_object() || !level.contains("dtrain")) return;
  const json& dtrain = level["dtrain"];
  bool well_formed = dtrain.is_object() && !dtrain.empty();
  if (well_formed) {
    for (const auto& [key, value] : dtrain.items())
      well_formed =
          well_formed && (key == "hidden_units" || (key == "defaults" && value.is_object()));
  }
  if (!well_formed) {
    throw UsageError(
        fmt::format("{}: dtrain {} is not {{\"defaults\": {{...}}, \"hidden_units\": {{...}}}}",
                    source_name, show(dtrain)));
  }
  if (dtrain.contains("defaults")) spec.defaults = dtrain["defaults"];
  if (dtrain.contains("hidden_units"))
    spec.hidden_units = read_hidden_units(dtrain["hidden_units"], spec, source_name);
}

ModelSpec read_sequential(const nlohmann::json& input, const std::string& source_name) {
  const json* doc = &input;
  std::string loss = compiled_loss(*doc, source_name);
  std::optional<CompiledOptimizer> optimizer = read_compiled_optimizer(*doc, source_name);
  for (const char* wrapper : {"modelTopology", "model_config"}) {
    if (doc->is_object() && doc->contains(wrapper)) {
      doc = &(*doc)[wrapper];
      if (loss.empty()) loss = compiled_loss(*doc, source_name);
      if (!optimizer) optimizer = read_compiled_optimizer(*doc, source_name);
    }
  }
  if (!doc->is_object() || !doc->contains("class_name"))
    throw UsageError(fmt::format("{}: not a Keras model (no class_name)", source_name));
  if ((*doc)["class_name"] != "Sequential") {
    throw UsageError(fmt::format("{}: class_name {} is not supported (only Sequential)",
                                 source_name, show((*doc)["class_name"])));
  }
  const json& config = doc->value("config", json());
  const json* layers = &config;
  ModelSpec spec;
  spec.name = "sequential";
  if (config.is_object()) {
    if (config.contains("name") && config["name"].is_string()) spec.name = config["name"];
    layers = config.contains("layers") ? &config["layers"] : nullptr;
  }
  if (layers == nullptr || !layers->is_array())
    throw UsageError(fmt::format("{}: the Sequential config has no layers list", source_name));

  std::optional<Shape> input_shape;
  std::set<std::string> names;
  for (size_t i = 0; i < layers->size(); ++i) {
    const json& layer = (*layers)[i];
    const std::string class_name =
        layer.is_object() && layer.contains("class_name") && layer["class_name"].is_string()
            ? layer["class_name"].get<std::string>()
            : "?";
    const json empty = json::object();
    const json& layer_config =
        layer.is_object() && layer.contains("config") && layer["config"].is_object()
            ? layer["config"]
            : empty;
    OptionReader reader(source_name, i, class_name, layer_config);
    if (class_name == "?") reader.fail("not a layer (no class_name)");
    if (class_name == "InputLayer") {
      if (i != 0) reader.fail("an InputLayer is only supported as the first layer");
      input_shape = declared_input_shape(layer, layer_config, reader);
      if (!input_shape) reader.fail("neither batch_input_shape nor batch_shape is given");
      continue;
    }
    if (!input_shape) {
      input_shape = declared_input_shape(layer, layer_config, reader);
      if (!input_shape)
        reader.fail("the model's input shape is not given (no InputLayer, no batch_input_shape)");
    }
    LayerSpec layer_spec = read_layer(class_name, layer_config, reader);
    if (layer_spec.name.empty()) layer_spec.name = default_name(layer_spec, names);
    if (!names.insert(layer_spec.name).second)
      reader.fail(fmt::format("the name \"{}\" is used by an earlier layer", layer_spec.name));
    spec.layers.push_back(std::move(layer_spec));
  }
  if (!input_shape || spec.layers.empty())
    throw UsageError(fmt::format("{}: the model has no layers", source_name));
  spec.input_shape = *input_shape;
  spec.loss = std::move(loss);
  spec.optimizer = std::move(optimizer);
  read_dtrain(input, source_name, spec);
  return spec;
}

}  // namespace

}  // namespace dtrain
