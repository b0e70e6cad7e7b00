// The built-in models come from their embedded Keras JSON; the one parameter of a spec is the width
// of the layer it declares for --hidden_units (mlp's), with the stddev that follows it.
#include "nn/model_zoo.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "base/error.h"
#include "nn/builtin_models.h"
#include "nn/keras_json.h"
#include "nn/keras_json_writer.h"

namespace dtrain {
namespace {

bool is_json_path(const std::string& name) {
  return name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0;
}

ModelSpec read_spec_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(fmt::format("--model {}: cannot open the file", path));
  std::ostringstream text;
  text << in.rdbuf();
  return read_keras_json(text.str(), model_source_name(path));
}

ModelSpec builtin_spec(const std::string& name) {
  for (const BuiltinModel& model : builtin_models()) {
    if (model.name == name) return read_keras_json(model.json, model_source_name(name));
  }
  throw UsageError(fmt::format("--model {}: unknown model; choose one of {} or a Keras .json file",
                               name, fmt::join(model_names(), ", ")));
}

ModelSpec source_spec(const std::string& name) {
  return is_json_path(name) ? read_spec_file(name) : builtin_spec(name);
}

LayerSpec& layer_named(ModelSpec& spec, const std::string& name) {
  for (LayerSpec& layer : spec.layers) {
    if (layer.name == name) return layer;
  }
  throw std::logic_error(fmt::format("no layer {} in the spec of {}", name, spec.name));
}

// The layer the spec declares for --hidden_units (nn/model_spec.h), sized.
void apply_hidden_units(const ModelConfig& config, ModelSpec& spec) {
  if (!spec.hidden_units) return;
  const int hidden = config.hidden_units;
  if (hidden < 1) throw UsageError(fmt::format("--hidden_units {}: must be at least 1", hidden));
  layer_named(spec, spec.hidden_units->layer).units = hidden;
  // Computed in float as it always was, so the initial values stay bit for bit.
  if (!spec.hidden_units->fan_in_stddev.empty()) {
    layer_named(spec, spec.hidden_units->fan_in_stddev).kernel_initializer.stddev =
        1.0f / std::sqrt(static_cast<float>(hidden));
  }
}

}  // namespace

std::string model_source_name(const std::string& name) {
  return is_json_path(name) ? name : fmt::format("built-in model {}", name);
}

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const BuiltinModel& model : builtin_models()) out.emplace_back(model.name);
    return out;
  }();
  return names;
}

void resolve_model(ModelConfig& config) {
  config.source = std::make_shared<const ModelSpec>(source_spec(config.name));
}

ModelSpec model_spec(const ModelConfig& config) {
  ModelSpec spec = config.source ? *config.source : source_spec(config.name);
  apply_hidden_units(config, spec);
  if (config.l2) {
    // Keras' L2(x) is l2 = 2x in TensorFlow's convention; halving and doubling a float's value in
    // double is exact, so the model gets exactly --l2.
    for (LayerSpec& layer : spec.layers) {
      if (layer.kind == LayerKind::kDense || layer.kind == LayerKind::kConv2D)
        layer.kernel_l2 = static_cast<double>(*config.l2) / 2.0;
    }
  }
  return spec;
}

std::unique_ptr<Model> make_model(const ModelConfig& config) {
  return build_model(model_spec(config),
                     {.l2 = std::nullopt, .conv_implementation = config.conv_kernels},
                     is_json_path(config.name) ? config.name : "--model " + config.name);
}

nlohmann::ordered_json model_spec_json(const ModelConfig& config) {
  return to_keras_json(model_spec(config));
}

std::unique_ptr<Model> make_model_from_json(const nlohmann::json& keras_json) {
  return build_model(read_keras_json(keras_json, "checkpoint model spec"), {},
                     "checkpoint model spec");
}

}  // namespace dtrain
