// How OptionReader checks each kind of option, and the Keras initialisers it knows by name.
#include "nn/keras_options.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>

#include "base/error.h"
#include "nn/keras_json.h"

namespace dtrain {

using json = nlohmann::json;

namespace keras {

std::string show(const json& value) {
  if (value.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < value.size(); ++i) out += (i > 0 ? ", " : "") + show(value[i]);
    return out + "]";
  }
  return value.dump();
}

const json& unwrap(const json& v) {
  if (v.is_object() && v.contains("items") && v["items"].is_array() &&
      (v.value("class_name", "") == "__tuple__" || v.value("class_name", "") == "TensorShape"))
    return v["items"];
  return v;
}

}  // namespace keras

namespace {

// "glorot_uniform" -> "GlorotUniform": Keras also accepts an initialiser by its snake-case name.
std::string camel_case(const std::string& snake) {
  std::string out;
  bool upper = true;
  for (char c : snake) {
    if (c == '_') {
      upper = true;
      continue;
    }
    out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return out;
}

}  // namespace

using keras::show;
using keras::unwrap;

void OptionReader::fail(const std::string& what) const {
  throw UsageError(fmt::format("{}: layer {} ({}): {}", source_, index_, class_name_, what));
}

void OptionReader::unsupported(const std::string& key, const json& value,
                               const std::string& only) const {
  fail(fmt::format("{} {} is not supported (only {})", key, show(value), only));
}

const json& OptionReader::get(const std::string& key) {
  used_.insert(key);
  if (!config_.contains(key)) fail(fmt::format("option {} is missing", key));
  return config_.at(key);
}

int OptionReader::positive_int(const std::string& key) {
  const json& v = get(key);
  if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > (1 << 30))
    fail(fmt::format("{} {} is not a positive integer", key, show(v)));
  return v.get<int>();
}

std::array<int, 2> OptionReader::pair(const std::string& key) {
  const json& v = unwrap(get(key));
  if (v.is_number_integer() && v.get<int64_t>() > 0 && v.get<int64_t>() <= (1 << 30))
    return {v.get<int>(), v.get<int>()};
  if (v.is_array() && v.size() == 2 && v[0].is_number_integer() && v[1].is_number_integer() &&
      v[0].get<int64_t>() > 0 && v[1].get<int64_t>() > 0 && v[0].get<int64_t>() <= (1 << 30) &&
      v[1].get<int64_t>() <= (1 << 30))
    return {v[0].get<int>(), v[1].get<int>()};
  fail(fmt::format("{} {} is not a positive integer or a pair of them", key, show(v)));
}

float OptionReader::bounded_number(const std::string& key, float fallback, double lo, double hi,
                                   bool lo_open) {
  if (!has(key)) {
    used_.insert(key);
    return fallback;
  }
  const json& v = get(key);
  const bool in_range = v.is_number() && (lo_open ? v.get<double>() > lo : v.get<double>() >= lo) &&
                        v.get<double>() <= hi;
  if (!in_range) {
    fail(fmt::format("{} {} is not a number in {}{}, {}]", key, show(v), lo_open ? "(" : "[", lo,
                     hi));
  }
  return static_cast<float>(v.get<double>());
}

bool OptionReader::boolean(const std::string& key, bool fallback) {
  if (!config_.contains(key)) return fallback;
  const json& v = get(key);
  if (!v.is_boolean()) fail(fmt::format("{} {} is not true or false", key, show(v)));
  return v.get<bool>();
}

Padding OptionReader::padding() {
  if (!config_.contains("padding")) return Padding::kValid;
  const json& v = get("padding");
  if (v == "valid") return Padding::kValid;
  if (v == "same") return Padding::kSame;
  unsupported("padding", v, "valid or same");
}

ActivationKind OptionReader::activation(const std::string& key) {
  if (!has(key)) {
    used_.insert(key);
    return ActivationKind::kLinear;
  }
  const json& v = get(key);
  for (ActivationKind kind : {ActivationKind::kLinear, ActivationKind::kRelu, ActivationKind::kTanh,
                              ActivationKind::kSigmoid, ActivationKind::kSoftmax}) {
    if (v == activation_name(kind)) return kind;
  }
  unsupported(key, v, "linear, relu, tanh, sigmoid or softmax");
}

InitSpec OptionReader::initializer(const std::string& key, InitSpec fallback) {
  if (!has(key)) {
    used_.insert(key);
    return fallback;
  }
  const json& v = get(key);
  std::string class_name;
  json config = json::object();
  if (v.is_string()) {
    class_name = camel_case(v.get<std::string>());
  } else if (v.is_object() && v.contains("class_name") && v["class_name"].is_string()) {
    class_name = v["class_name"].get<std::string>();
    if (v.contains("config") && v["config"].is_object()) config = v["config"];
  } else {
    fail(fmt::format("{} {} is not an initializer", key, show(v)));
  }
  return read_initializer(key, class_name, config);
}

double OptionReader::kernel_l2() {
  if (!has("kernel_regularizer")) {
    used_.insert("kernel_regularizer");
    return 0.0;
  }
  const json& v = get("kernel_regularizer");
  const std::string class_name = v.is_object() ? v.value("class_name", "") : "";
  const json config = v.is_object() ? v.value("config", json::object()) : json::object();
  const bool l1_zero = !config.contains("l1") || config["l1"] == 0;
  if ((class_name == "L2" || class_name == "l2" || class_name == "L1L2") && l1_zero &&
      config.contains("l2") && config["l2"].is_number() && config["l2"].get<double>() >= 0 &&
      std::isfinite(static_cast<float>(2 * config["l2"].get<double>()))) {
    return config["l2"].get<double>();
  }
  unsupported("kernel_regularizer", v, "null or L2");
}

void OptionReader::check_rest(const std::vector<std::pair<std::string, json>>& defaults) {
  for (const auto& [key, value] : config_.items()) {
    if (used_.contains(key) || value.is_null()) continue;
    if (key == "name" || key == "seed" || key == "dtrain" || key == "batch_input_shape" ||
        key == "batch_shape" || key == "batch_size" || key == "input_dim")
      continue;
    if (key == "trainable" && value == true) continue;
    if (key == "dtype" && is_float32(value)) continue;
    if (unwrap(value) == json::array({1, 1}) && key == "dilation_rate") continue;
    if ((key == "data_format") && value == "channels_last") continue;
    bool is_default = false;
    for (const auto& [dkey, dvalue] : defaults) {
      if (dkey == key && (value == dvalue || (dvalue.is_array() && value.is_number_integer() &&
                                              value == dvalue[0] && dvalue[0] == dvalue[1])))
        is_default = true;
    }
    if (is_default) continue;
    std::string only = "null";
    for (const auto& [dkey, dvalue] : defaults) {
      if (dkey == key) only = dvalue.is_array() ? show(dvalue[0]) : show(dvalue);
    }
    if (key == "trainable") only = "true";
    if (key == "dtype") only = "float32";
    if (key == "data_format") only = "channels_last";
    unsupported(key, value, only);
  }
}

bool OptionReader::is_float32(const json& v) {
  if (v == "float32") return true;
  // Keras 3: {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}}.
  return v.is_object() && v.value("class_name", "") == "DTypePolicy" && v.contains("config") &&
         v["config"].value("name", "") == "float32";
}

float OptionReader::number(const std::string& key, const std::string& name, const json& config,
                           float fallback) const {
  if (!config.contains(name) || config[name].is_null()) return fallback;
  if (!config[name].is_number())
    fail(fmt::format("{} {} {} is not a number", key, name, show(config[name])));
  // dtrain computes in float32: a value beyond its range would become an infinity.
  const double value = config[name].get<double>();
  if (!std::isfinite(static_cast<float>(value)))
    fail(fmt::format("{} {} {} is beyond float32's range", key, name, show(config[name])));
  return static_cast<float>(value);
}

InitSpec OptionReader::read_initializer(const std::string& key, const std::string& class_name,
                                        const json& config) const {
  std::set<std::string> known = {"seed"};
  InitSpec init;
  bool found = true;
  if (class_name == "Zeros") {
    init.kind = InitKind::kZeros;
  } else if (class_name == "Ones") {
    init.kind = InitKind::kOnes;
  } else if (class_name == "Constant") {
    init = InitSpec::constant(number(key, "value", config, 0.0f));
    known.insert("value");
  } else if (class_name == "RandomNormal" || class_name == "TruncatedNormal") {
    init.kind = class_name == "RandomNormal" ? InitKind::kRandomNormal : InitKind::kTruncatedNormal;
    init.mean = number(key, "mean", config, 0.0f);
    init.stddev = number(key, "stddev", config, 0.05f);
    known.insert({"mean", "stddev"});
  } else if (class_name == "RandomUniform") {
    init.kind = InitKind::kRandomUniform;
    init.minval = number(key, "minval", config, -0.05f);
    init.maxval = number(key, "maxval", config, 0.05f);
    known.insert({"minval", "maxval"});
  } else if (class_name == "VarianceScaling") {
    init = variance_scaling(key, config);
    known.insert({"scale", "mode", "distribution"});
  } else {
    found = false;
    for (const KerasPreset& preset : keras_presets()) {
      if (class_name == preset.class_name) {
        init = preset.init;
        found = true;
      }
    }
  }
  if (!found) {
    unsupported(key, class_name,
                "GlorotUniform, GlorotNormal, HeNormal, HeUniform, LecunNormal, LecunUniform, "
                "VarianceScaling, Zeros, Ones, Constant, RandomNormal, RandomUniform or "
                "TruncatedNormal");
  }
  // The seed is not used: dtrain seeds every tensor from (run seed, tensor index).
  for (const auto& [name, value] : config.items()) {
    if (!known.contains(name) && !value.is_null())
      fail(fmt::format("{} {} option {} {} is not supported", key, class_name, name, show(value)));
  }
  return init;
}

InitSpec OptionReader::variance_scaling(const std::string& key, const json& config) const {
  InitSpec init = InitSpec::variance_scaling(number(key, "scale", config, 1.0f), FanMode::kFanIn,
                                             Distribution::kTruncatedNormal);
  const std::string mode = config.value("mode", "fan_in");
  if (mode == "fan_in") {
    init.mode = FanMode::kFanIn;
  } else if (mode == "fan_out") {
    init.mode = FanMode::kFanOut;
  } else if (mode == "fan_avg") {
    init.mode = FanMode::kFanAvg;
  } else {
    fail(
        fmt::format("{} VarianceScaling mode \"{}\" is not supported (only fan_in, fan_out or "
                    "fan_avg)",
                    key, mode));
  }
  // "normal" is what Keras 2.0-2.2 and TensorFlow.js wrote for Keras' truncated_normal.
  const std::string distribution = config.value("distribution", "truncated_normal");
  if (distribution == "truncated_normal" || distribution == "normal") {
    init.distribution = Distribution::kTruncatedNormal;
  } else if (distribution == "untruncated_normal") {
    init.distribution = Distribution::kUntruncatedNormal;
  } else if (distribution == "uniform") {
    init.distribution = Distribution::kUniform;
  } else {
    fail(
        fmt::format("{} VarianceScaling distribution \"{}\" is not supported (only "
                    "truncated_normal, untruncated_normal or uniform)",
                    key, distribution));
  }
  return init;
}

}  // namespace dtrain
