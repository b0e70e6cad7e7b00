// What a ps job's tasks agree on (ps/job_settings.h), from a task's own flags; and a ps task's
// options from the chief's, for a ps started with only the cluster flags, as TensorFlow's are.
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nn/param_set.h"
#include "optim/optimizer.h"
#include "ps/ps_service_options.h"
#include "tensor/blas.h"
#include "train/ps_cluster_config.h"

namespace dtrain {

// The flags (without their dashes) whose values the settings carry: those a ps task's command
// line gives are its own, the rest it takes from the chief's (PsClusterConfig::given_flags).
std::span<const std::string_view> ps_job_setting_flags();

// Whether flags given to a ps task name its model, so that it serves its own settings rather than
// learn the chief's.
bool names_a_model(const std::set<std::string>& given);

// This task's settings: model `model_name` with `specs` trained at `precision`, `optimizer`, and
// config's partition and sync flags as given (unresolved: each ps resolves them against its own
// cluster). A worker that joined a running job (config.joined_as) leaves out the job's size, which
// it was not told.
nlohmann::json ps_job_settings(const std::string& model_name, const std::vector<ParamSpec>& specs,
                               Precision precision, const OptimizerConfig& optimizer,
                               const PsClusterConfig& config);

// The settings' model layout, optimizer, partition and sync, for ps task `config` of its cluster,
// into `into` (specs, map, optimizer, sync, planned_workers, min_workers, settings). Throws Error
// naming the value it cannot take (a shape out of range, an unknown optimizer, a sync option the
// cluster does not allow).
// Returns the model's name.
std::string adopt_ps_job_settings(const nlohmann::json& settings, const PsClusterConfig& config,
                                  PsServiceOptions& into);

// The keys of `own` that `given` (flag names) covers; the rest are dropped.
nlohmann::json given_settings(const nlohmann::json& own, const std::set<std::string>& given);

}  // namespace dtrain
