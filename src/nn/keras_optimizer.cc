// A compiled optimizer read by class and key. Keras 3's keys are dtrain's flag names
// (keras/src/optimizers/*.py: learning_rate, momentum, nesterov, beta_1, beta_2, epsilon, rho,
// centered, initial_accumulator_value, weight_decay, clipnorm, clipvalue, global_clipnorm), so
// Keras 2's and TensorFlow.js's keys are translated to them; the defaults filled in are those of
// the class's constructor in the framework that wrote the file.
#include "nn/keras_optimizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>
#include <utility>

#include "base/error.h"
#include "nn/keras_options.h"

namespace dtrain {
namespace {

using json = nlohmann::json;
using keras::show;

struct OptimizerClass {
  std::string_view class_name;  // as Keras or TensorFlow.js names it
  std::string_view optimizer;   // dtrain's --optimizer
  json defaults;                // the constructor's, under dtrain's flag names
};

const std::vector<OptimizerClass>& classes() {
  // Keras 3's defaults (sgd.py, rmsprop.py, adam.py, adamw.py, adagrad.py, nadam.py); Keras 2's
  // and TensorFlow.js's are the same where they have the class. Momentum is TensorFlow.js's
  // (tf.train.momentum: TensorFlow's ApplyMomentum, dtrain's momentum); RMSProp its RMSprop.
  static const std::vector<OptimizerClass> table = [] {
    const json adam = {
        {"learning_rate", 0.001}, {"beta_1", 0.9}, {"beta_2", 0.999}, {"epsilon", 1e-7}};
    json adamw = adam;
    adamw["weight_decay"] = 0.004;
    const json rmsprop = {{"learning_rate", 0.001},
                          {"rho", 0.9},
                          {"momentum", 0.0},
                          {"epsilon", 1e-7},
                          {"centered", false}};
    return std::vector<OptimizerClass>{
        {"SGD", "sgd", {{"learning_rate", 0.01}, {"momentum", 0.0}, {"nesterov", false}}},
        {"RMSprop", "rmsprop", rmsprop},
        {"RMSProp", "rmsprop", rmsprop},
        {"Adam", "adam", adam},
        {"AdamW", "adamw", adamw},
        {"Adagrad",
         "adagrad",
         {{"learning_rate", 0.001}, {"initial_accumulator_value", 0.1}, {"epsilon", 1e-7}}},
        {"Nadam", "nadam", adam},
        {"Momentum", "momentum", {{"learning_rate", 0.01}, {"momentum", 0.9}, {"nesterov", false}}},
    };
  }();
  return table;
}

std::string class_list() {
  std::string names;
  for (const OptimizerClass& c : classes()) {
    if (c.class_name == "RMSProp") continue;  // RMSprop's other spelling
    names += fmt::format("{}{}", names.empty() ? "" : ", ", c.class_name);
  }
  return names;
}

// Keras 2.11+ writes its new optimizers as "Custom>Adam"; a Keras 3 string names the class in
// lower case ("adam").
const OptimizerClass* find_class(std::string name) {
  if (name.starts_with("Custom>")) name = name.substr(7);
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const OptimizerClass& c : classes()) {
    if (c.class_name == name) return &c;  // first: TensorFlow.js' RMSProp is not Keras' RMSprop
  }
  for (const OptimizerClass& c : classes()) {
    if (c.optimizer == lower) return &c;
  }
  return nullptr;
}

// A key of the file's optimizer config, as a flag name ("" for a key that changes nothing).
struct KeyReading {
  std::string flag;
  bool ignored = false;
};

// Keys every framework writes that change nothing here, whatever their value.
constexpr std::array<std::string_view, 4> kIgnored = {"name", "is_legacy_optimizer", "jit_compile",
                                                      "ema_momentum"};
// Keys that must keep their default (false or null), or the optimizer is another one.
constexpr std::array<std::string_view, 6> kOff = {"amsgrad",
                                                  "use_ema",
                                                  "ema_overwrite_frequency",
                                                  "loss_scale_factor",
                                                  "gradient_accumulation_steps",
                                                  "decay"};

std::string flag_of(const std::string& key, const OptimizerClass& c) {
  if (key == "lr" || key == "learningRate") return "learning_rate";
  if (key == "useNesterov") return "nesterov";
  if (key == "beta1") return "beta_1";
  if (key == "beta2") return "beta_2";
  if (key == "initialAccumulatorValue") return "initial_accumulator_value";
  // TensorFlow.js' RMSProp calls its rho "decay"; Keras' "decay" is its old time-based decay of
  // the learning rate.
  if (key == "decay" && c.class_name == "RMSProp") return "rho";
  return key;
}

class Reader {
 public:
  Reader(const std::string& source, std::string origin, const OptimizerClass& c)
      : source_(source), origin_(std::move(origin)), class_(c) {}

  void fail(const std::string& why) const {
    throw UsageError(fmt::format("{}: {} {}", source_, origin_, why));
  }

  void read(const std::string& key, const json& value, json& settings) const {
    if (std::find(kIgnored.begin(), kIgnored.end(), key) != kIgnored.end()) return;
    const std::string flag = flag_of(key, class_);
    if (std::find(kOff.begin(), kOff.end(), flag) != kOff.end()) {
      if (value.is_null() || value == false || value == 0) return;
      fail(fmt::format("{} {} is not implemented", key, show(value)));
    }
    const bool everywhere = flag == "weight_decay" || flag == "clipnorm" || flag == "clipvalue" ||
                            flag == "global_clipnorm";
    if (!everywhere && !class_.defaults.contains(flag))
      fail(fmt::format("setting {} {} is not one dtrain knows for it", key, show(value)));
    if (value.is_null() && (everywhere || flag == "momentum")) return;  // Keras' None: off
    if (flag == "learning_rate" && value.is_object()) {
      fail(fmt::format("learning_rate {} is a schedule object; give --lr_schedule and its flags",
                       show(value)));
    }
    const json& like = everywhere ? json(0.0) : class_.defaults[flag];
    if (like.is_boolean() ? !value.is_boolean() : !value.is_number())
      fail(fmt::format("{} {} is not a {}", key, show(value),
                       like.is_boolean() ? "bool" : "number"));
    settings[flag] = value;
  }

 private:
  const std::string& source_;
  std::string origin_;
  const OptimizerClass& class_;
};

// {"class_name", "config"}, or a Keras 3 string; the container's key for messages.
std::optional<CompiledOptimizer> read_object(const json& given, const std::string& where,
                                             const std::string& source_name) {
  if (given.is_null()) return std::nullopt;
  std::string class_name;
  json config = json::object();
  if (given.is_string()) {
    class_name = given.get<std::string>();
  } else if (given.is_object() && given.contains("class_name") && given["class_name"].is_string()) {
    class_name = given["class_name"].get<std::string>();
    if (given.contains("config")) config = given["config"];
  } else {
    throw UsageError(fmt::format("{}: {} {} is not an optimizer ({{\"class_name\", \"config\"}})",
                                 source_name, where, show(given)));
  }
  const OptimizerClass* c = find_class(class_name);
  const std::string origin = fmt::format("{} {}", where, class_name);
  if (c == nullptr) {
    throw UsageError(fmt::format("{}: {} is not implemented (dtrain has {})", source_name, origin,
                                 class_list()));
  }
  if (!config.is_object())
    throw UsageError(
        fmt::format("{}: {} config {} is not an object", source_name, origin, show(config)));
  CompiledOptimizer out{.origin = origin, .settings = c->defaults};
  const Reader reader(source_name, origin, *c);
  for (const auto& [key, value] : config.items()) reader.read(key, value, out.settings);
  out.settings["optimizer"] = c->optimizer;
  return out;
}

}  // namespace

std::optional<CompiledOptimizer> read_compiled_optimizer(const json& level,
                                                         const std::string& source_name) {
  if (!level.is_object()) return std::nullopt;
  // Keras 3 keeps the optimizer object under "optimizer"; Keras 2 and TensorFlow.js under
  // "optimizer_config".
  struct Place {
    const char* container;
    const char* key;
  };
  for (const Place place :
       {Place{"compile_config", "optimizer"}, Place{"training_config", "optimizer_config"},
        Place{"trainingConfig", "optimizer_config"}}) {
    if (!level.contains(place.container) || !level[place.container].is_object()) continue;
    const json& container = level[place.container];
    if (!container.contains(place.key)) continue;
    return read_object(container[place.key], fmt::format("{} {}", place.container, place.key),
                       source_name);
  }
  return std::nullopt;
}

nlohmann::ordered_json keras_optimizer_json(const CompiledOptimizer& optimizer) {
  const std::string name = optimizer.settings.value("optimizer", "");
  std::string_view class_name = name;
  for (const OptimizerClass& c : classes()) {
    if (c.optimizer == name) {
      class_name = c.class_name;
      break;
    }
  }
  nlohmann::ordered_json config = nlohmann::ordered_json::object();
  for (const auto& [key, value] : optimizer.settings.items()) {
    if (key != "optimizer") config[key] = nlohmann::ordered_json::parse(value.dump());
  }
  return {{"module", "keras.optimizers"}, {"class_name", class_name}, {"config", config}};
}

}  // namespace dtrain
