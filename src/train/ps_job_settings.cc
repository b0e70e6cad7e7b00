// The settings' JSON, written by every task alike and read back by a ps that learns them: keys
// named as the flags, so a refusal names the flag to fix.
#include "train/ps_job_settings.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>

#include "base/error.h"
#include "ps/job_settings.h"
#include "ps/partition.h"

namespace dtrain {

namespace {

using nlohmann::json;

// A layout no ps could hold is refused before anything is allocated for it.
constexpr int64_t kMaxSettingsFloats = int64_t{1} << 36;
constexpr size_t kMaxNameBytes = 1024;

json optional_value(const std::optional<float>& value) {
  return value ? json(*value) : json(nullptr);
}

json layout_json(const std::vector<ParamSpec>& specs) {
  json layout = json::array();
  for (const ParamSpec& spec : specs)
    layout.push_back({{"name", spec.name}, {"shape", spec.shape}, {"trainable", spec.trainable}});
  return layout;
}

// The value at `key` of `group`, read as T; Error naming the key otherwise.
template <typename T>
T value_at(const json& group, const char* group_name, const char* key) {
  const auto it = group.find(key);
  if (it == group.end()) throw Error(fmt::format("the settings say no {}.{}", group_name, key));
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    throw Error(fmt::format("the settings' {}.{} is not a {} ({})", group_name, key,
                            std::is_same_v<T, bool>          ? "boolean"
                            : std::is_same_v<T, std::string> ? "text"
                                                             : "number in range",
                            it->dump()));
  }
}

// A count or size of the settings, in [0, limit].
int64_t count_at(const json& group, const char* group_name, const char* key, int64_t limit) {
  const auto value = value_at<int64_t>(group, group_name, key);
  if (value < 0 || value > limit)
    throw Error(fmt::format("the settings' {}.{} is out of range ({})", group_name, key, value));
  return value;
}

template <typename T>
std::optional<T> optional_at(const json& group, const char* group_name, const char* key) {
  const auto it = group.find(key);
  if (it != group.end() && it->is_null()) return std::nullopt;
  return value_at<T>(group, group_name, key);
}

const json& group_at(const json& settings, const char* name) {
  const auto it = settings.find(name);
  if (it == settings.end() || !it->is_object())
    throw Error(fmt::format("the settings have no \"{}\" object", name));
  return *it;
}

std::vector<ParamSpec> specs_of(const json& model) {
  const auto layout = model.find("layout");
  if (layout == model.end() || !layout->is_array())
    throw Error("the settings' model.layout is not a list");
  std::vector<ParamSpec> specs;
  int64_t floats = 0;
  for (const json& entry : *layout) {
    if (!entry.is_object()) throw Error("the settings' model.layout holds a non-object");
    ParamSpec spec;
    spec.name = value_at<std::string>(entry, "model.layout", "name");
    if (spec.name.empty() || spec.name.size() > kMaxNameBytes)
      throw Error("the settings' model.layout has a variable with no name or a very long one");
    spec.shape = value_at<Shape>(entry, "model.layout", "shape");
    spec.trainable = value_at<bool>(entry, "model.layout", "trainable");
    int64_t size = 1;
    for (int64_t d : spec.shape) {
      if (d < 0 || d > kMaxSettingsFloats || size > kMaxSettingsFloats / std::max<int64_t>(d, 1))
        throw Error(fmt::format("the settings' variable {} has a shape out of range", spec.name));
      size *= d;
    }
    floats += size;
    if (floats > kMaxSettingsFloats)
      throw Error("the settings' model has more values than a ps task can hold");
    specs.push_back(std::move(spec));
  }
  return specs;
}

OptimizerConfig optimizer_of(const json& o) {
  OptimizerConfig c;
  c.name = value_at<std::string>(o, "optimizer", "name");
  c.momentum = optional_at<float>(o, "optimizer", "momentum");
  c.use_nesterov = value_at<bool>(o, "optimizer", "nesterov");
  c.beta1 = value_at<float>(o, "optimizer", "beta_1");
  c.beta2 = value_at<float>(o, "optimizer", "beta_2");
  c.epsilon = optional_at<float>(o, "optimizer", "epsilon");
  c.rho = value_at<float>(o, "optimizer", "rho");
  c.centered = value_at<bool>(o, "optimizer", "centered");
  c.initial_accumulator_value = value_at<float>(o, "optimizer", "initial_accumulator_value");
  c.weight_decay = optional_at<float>(o, "optimizer", "weight_decay");
  c.clipnorm = value_at<float>(o, "optimizer", "clipnorm");
  c.global_clipnorm = value_at<float>(o, "optimizer", "global_clipnorm");
  c.clipvalue = value_at<float>(o, "optimizer", "clipvalue");
  return c;
}

}  // namespace

std::span<const std::string_view> ps_job_setting_flags() {
  static constexpr std::array<std::string_view, 24> kFlags = {"model",
                                                              "hidden_units",
                                                              "precision",
                                                              "placement",
                                                              "min_shard_bytes",
                                                              "optimizer",
                                                              "momentum",
                                                              "nesterov",
                                                              "beta_1",
                                                              "beta_2",
                                                              "epsilon",
                                                              "rho",
                                                              "centered",
                                                              "initial_accumulator_value",
                                                              "weight_decay",
                                                              "clipnorm",
                                                              "global_clipnorm",
                                                              "clipvalue",
                                                              "strategy",
                                                              "sync_replicas",
                                                              "replicas_to_aggregate",
                                                              "total_num_replicas",
                                                              "min_workers",
                                                              "max_workers"};
  return kFlags;
}

bool names_a_model(const std::set<std::string>& given) {
  return given.contains("model") || given.contains("hidden_units");
}

json ps_job_settings(const std::string& model_name, const std::vector<ParamSpec>& specs,
                     Precision precision, const OptimizerConfig& o, const PsClusterConfig& config) {
  json sync = {{"sync_replicas", config.sync.sync_replicas},
               {"replicas_to_aggregate", config.sync.replicas_to_aggregate},
               {"min_workers", config.min_workers}};
  if (config.joined_as < 0) {
    sync["total_num_replicas"] = config.sync.total_num_replicas;
    sync["max_workers"] = config.max_workers;
  }
  return {{"model",
           {{"name", model_name},
            {"layout", layout_json(specs)},
            {"precision", precision_name(precision)},
            {"placement", placement_name(config.placement)},
            {"min_shard_bytes", config.min_shard_bytes},
            {"max_shard_bytes", config.max_shard_bytes}}},
          {"optimizer",
           {{"name", o.name},
            {"momentum", optional_value(o.momentum)},
            {"nesterov", o.use_nesterov},
            {"beta_1", o.beta1},
            {"beta_2", o.beta2},
            {"epsilon", optional_value(o.epsilon)},
            {"rho", o.rho},
            {"centered", o.centered},
            {"initial_accumulator_value", o.initial_accumulator_value},
            {"weight_decay", optional_value(o.weight_decay)},
            {"clipnorm", o.clipnorm},
            {"global_clipnorm", o.global_clipnorm},
            {"clipvalue", o.clipvalue}}},
          {"sync", sync}};
}

std::string adopt_ps_job_settings(const json& settings, const PsClusterConfig& config,
                                  PsServiceOptions& into) {
  const json& model = group_at(settings, "model");
  std::string name = value_at<std::string>(model, "model", "name");
  if (name.size() > kMaxNameBytes) throw Error("the settings' model.name is very long");
  const json& sync = group_at(settings, "sync");
  PsClusterConfig learnt = config;
  try {
    learnt.placement = parse_placement(value_at<std::string>(model, "model", "placement"));
  } catch (const UsageError& error) {
    throw Error(fmt::format("the settings' model.placement: {}", error.what()));
  }
  constexpr int64_t kMaxBytes = int64_t{1} << 40;
  learnt.min_shard_bytes =
      static_cast<size_t>(count_at(model, "model", "min_shard_bytes", kMaxBytes));
  learnt.max_shard_bytes =
      static_cast<size_t>(count_at(model, "model", "max_shard_bytes", kMaxBytes));
  if (learnt.min_shard_bytes == 0 || learnt.max_shard_bytes == 0)
    throw Error("the settings' model.min_shard_bytes and max_shard_bytes must be above 0");
  learnt.sync.sync_replicas = value_at<bool>(sync, "sync", "sync_replicas");
  constexpr int64_t kMaxWorkers = int64_t{1} << 20;
  const auto count = [&](const char* key) {
    return static_cast<int>(count_at(sync, "sync", key, kMaxWorkers));
  };
  learnt.sync.replicas_to_aggregate = count("replicas_to_aggregate");
  learnt.sync.total_num_replicas = count("total_num_replicas");
  learnt.min_workers = count("min_workers");
  learnt.max_workers = count("max_workers");
  std::vector<ParamSpec> specs = specs_of(model);
  OptimizerConfig optimizer = optimizer_of(group_at(settings, "optimizer"));
  try {
    // The same checks as the flags': an optimizer's hyper-parameters, sync against the cluster.
    if (std::find(optimizer_names().begin(), optimizer_names().end(), optimizer.name) ==
        optimizer_names().end()) {
      throw UsageError(fmt::format("unknown optimizer \"{}\"", optimizer.name));
    }
    check_optimizer_config(optimizer);
    into.sync = resolve_sync(learnt);
  } catch (const UsageError& error) {
    throw Error(fmt::format("the chief's settings: {}", error.what()));
  }
  into.map = partition_for(ParamSet(specs), learnt);
  into.specs = std::move(specs);
  into.optimizer = std::move(optimizer);
  into.min_workers = learnt.sync.sync_replicas ? learnt.min_workers : 0;
  // A peer's word, checked here as the flag's row checks the chief's own.
  if (into.min_workers > into.sync.total_num_replicas) {
    throw Error(
        fmt::format("the chief's settings: sync.min_workers {} is above the job's {} workers",
                    into.min_workers, into.sync.total_num_replicas));
  }
  into.planned_workers = 0;
  // An async job that takes joining workers holds room for --max_workers of them.
  if (!into.sync.sync_replicas && learnt.max_workers > into.sync.total_num_replicas) {
    into.planned_workers = into.sync.total_num_replicas;
    into.sync.total_num_replicas = learnt.max_workers;
  }
  into.settings = settings.dump();
  return name;
}

json given_settings(const json& own, const std::set<std::string>& given) {
  const auto has = [&](const char* flag) { return given.contains(flag); };
  json kept = json::object();
  for (const auto& [group, values] : own.items()) {
    for (const auto& [key, value] : values.items()) {
      bool keep = has(key.c_str());
      if (group == "model" && (key == "name" || key == "layout"))
        keep = has("model") || has("hidden_units");
      if (group == "optimizer" && key == "name") keep = has("optimizer");
      if (group == "sync" && key == "sync_replicas") keep = has("sync_replicas") || has("strategy");
      if (keep) kept[group][key] = value;
    }
  }
  return kept;
}

}  // namespace dtrain
