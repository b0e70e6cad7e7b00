// Per-model default training settings, read from the model's spec: the built-in models carry the
// recipes of their tutorials in their JSON (src/nn/models/, docs/models.md says why each), a
// user's file may carry its own, and what neither names is Keras' default. Each key is applied
// through its row of the flag table, as the flag would be.
#include "plan/recipes.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "base/error.h"
#include "nn/model_zoo.h"
#include "plan/flags.h"
#include "plan/run_plan.h"

namespace dtrain {
namespace {

using nlohmann::json;

std::string recipe_flags() {
  std::vector<std::string_view> names;
  for (const FlagSpec& flag : flag_table()) {
    if (flag.recipe) names.push_back(flag.name.substr(2));
  }
  return fmt::format("{}", fmt::join(names, ", "));
}

const FlagSpec& recipe_row(const std::string& key, const std::string& source) {
  const FlagSpec* flag = find_flag("--" + key);
  if (flag == nullptr || !flag->recipe) {
    throw UsageError(fmt::format("{}: dtrain defaults {} is not supported (only {})", source, key,
                                 recipe_flags()));
  }
  return *flag;
}

// A recipe's value as the flag's field type, or UsageError naming the file, the key and the value.
class RecipeValue {
 public:
  RecipeValue(const std::string& source, const std::string& key, const json& value,
              const FlagSpec& flag)
      : source_(source), key_(key), value_(value), flag_(flag) {}

  template <typename T>
  T as() const {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      // Beyond float32 is refused for every number, as the model's own floats are.
      check(value_.is_number() && std::isfinite(static_cast<float>(value_.get<double>())),
            "is not a finite number");
      return static_cast<T>(value_.get<double>());
    } else if constexpr (std::is_same_v<T, bool>) {
      check(value_.is_boolean(), "is not true or false");
      return value_.get<bool>();
    } else if constexpr (std::is_same_v<T, std::string>) {
      check(value_.is_string(), "is not a name");
      const std::string text = value_.get<std::string>();
      const auto& choices = flag_.choices;
      check(choices.empty() || std::find(choices.begin(), choices.end(), text) != choices.end(),
            fmt::format(": unknown; choose one of {}", fmt::join(choices, ", ")));
      return text;
    } else if constexpr (std::is_integral_v<T>) {
      check(value_.is_number_integer() && (std::is_signed_v<T> || value_.is_number_unsigned()),
            "is not a whole number");
      return value_.get<T>();
    } else {  // a list
      check(value_.is_array(), "is not a list");
      T list;
      for (const json& item : value_)
        list.push_back(RecipeValue(source_, key_, item, flag_).as<typename T::value_type>());
      return list;
    }
  }

 private:
  void check(bool ok, const std::string& why) const {
    if (ok) return;
    throw UsageError(fmt::format("{}: dtrain defaults {} {}{}{}", source_, key_, value_.dump(),
                                 why.starts_with(":") ? "" : " ", why));
  }

  const std::string& source_;
  const std::string& key_;
  const json& value_;
  const FlagSpec& flag_;
};

}  // namespace

void apply_recipe(const ModelSpec& spec, const std::string& source, FlagValues& flags,
                  const std::function<bool(std::string_view flag)>& given) {
  if (!spec.defaults.is_object()) return;
  for (const auto& [key, value] : spec.defaults.items()) {
    const FlagSpec& flag = recipe_row(key, source);
    const RecipeValue recipe(source, key, value, flag);
    std::visit(
        [&](auto field) {
          if constexpr (!std::is_same_v<decltype(field), std::monostate>) {
            using T = std::remove_reference_t<decltype(flags.*field)>;
            const T read = recipe.as<T>();  // checked even where a flag replaces it
            if (!given(flag.name)) flags.*field = read;
          }
        },
        flag.field);
  }
}

void set_recipe_settings(const FlagValues& f, TrainConfig& c) {
  c.optimizer.name = f.optimizer;
  c.learning_rate = f.learning_rate;
  c.lr_decay_rate = f.lr_decay_rate;
  c.moving_average_decay = f.moving_average_decay;
  c.eval_moving_average = f.moving_average_decay > 0;
  c.epochs = f.epochs;
}

namespace {

// One setting of a compiled optimizer onto the config: its key is the flag's name without "--".
void set_compiled(const std::string& key, const nlohmann::json& value, TrainConfig& c) {
  OptimizerConfig& o = c.optimizer;
  if (key == "nesterov") o.use_nesterov = value.get<bool>();
  if (key == "centered") o.centered = value.get<bool>();
  if (value.is_boolean()) return;
  const auto number = value.get<float>();
  if (key == "learning_rate") c.learning_rate = number;
  if (key == "momentum") o.momentum = number;
  if (key == "beta_1") o.beta1 = number;
  if (key == "beta_2") o.beta2 = number;
  if (key == "epsilon") o.epsilon = number;
  if (key == "rho") o.rho = number;
  if (key == "initial_accumulator_value") o.initial_accumulator_value = number;
  if (key == "weight_decay") o.weight_decay = number;
  if (key == "clipnorm") o.clipnorm = number;
  if (key == "clipvalue") o.clipvalue = number;
  if (key == "global_clipnorm") o.global_clipnorm = number;
}

}  // namespace

void apply_compiled_optimizer(const ModelSpec& spec, const std::string& source,
                              const std::function<bool(std::string_view flag)>& given,
                              TrainConfig& c) {
  if (!spec.optimizer) return;
  const CompiledOptimizer& compiled = *spec.optimizer;
  const std::string name = compiled.settings.at("optimizer").get<std::string>();
  if (spec.defaults.is_object() && spec.defaults.contains("optimizer") &&
      spec.defaults["optimizer"] != name) {
    throw UsageError(fmt::format("{}: dtrain defaults optimizer {} and {} ({}) disagree; keep one",
                                 source, spec.defaults["optimizer"].dump(), compiled.origin, name));
  }
  if (given("--optimizer")) {
    c.optimizer_note = fmt::format("not {}'s {} ({}): --optimizer {} is given", source,
                                   compiled.origin, name, c.optimizer.name);
    return;
  }
  std::vector<std::string> settings, flags;
  for (const auto& [key, value] : compiled.settings.items()) {
    if (key == "optimizer") continue;
    if (given("--" + key)) {
      flags.push_back("--" + key);
      continue;
    }
    set_compiled(key, value, c);
    settings.push_back(fmt::format("{} {}", key, value.dump()));
  }
  c.optimizer.name = name;
  c.optimizer_note =
      fmt::format("as {}'s {}: {}{}", source, compiled.origin, fmt::join(settings, ", "),
                  flags.empty() ? "" : fmt::format(" ({} given)", fmt::join(flags, ", ")));
}

void check_recipe(const ModelSpec& spec, const std::string& source, const TrainConfig& config,
                  const std::function<bool(std::string_view flag)>& given) {
  if (!spec.defaults.is_object()) return;
  RunPlan plan;
  plan.config = config;
  for (const auto& [key, value] : spec.defaults.items()) {
    const FlagSpec& flag = recipe_row(key, source);
    if (given(flag.name) || flag.check == nullptr) continue;
    try {
      flag.check(plan, 0);
    } catch (const UsageError& e) {
      // "--optimizer lion: unknown; ..." → "tiny.json: dtrain defaults optimizer lion: unknown;
      // ..."
      const std::string_view message = e.what();
      const std::string prefix = fmt::format("{} ", flag.name);
      if (!message.starts_with(prefix)) throw;
      throw UsageError(
          fmt::format("{}: dtrain defaults {} {}", source, key, message.substr(prefix.size())));
    }
  }
}

TrainConfig recipe_for(const std::string& model) {
  TrainConfig c;
  c.model.name = model;
  // The one read of the model's file in a run: every later use shares it through c.model.
  resolve_model(c.model);
  const std::string source = model_source_name(model);
  const auto none_given = [](std::string_view) { return false; };
  FlagValues flags;
  apply_recipe(*c.model.source, source, flags, none_given);
  set_recipe_settings(flags, c);
  apply_compiled_optimizer(*c.model.source, source, none_given, c);
  check_recipe(*c.model.source, source, c, none_given);
  return c;
}

}  // namespace dtrain
