// What a ps task and every worker of its job must agree on — the model's name and layout, its
// partition, the optimizer, sync — as the JSON object a worker says in kSettings (ps/ps_protocol.h)
// before its hello. Its keys are the flags' names ("optimizer", "beta_1", "sync_replicas", ...),
// grouped in "model", "optimizer" and "sync", so a difference names the flag to fix. A ps task
// started without some of them takes them from the chief's (train/ps_job_settings.h).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace dtrain {

// The first place where `theirs` differs from `ours`, as "sync.sync_replicas (false here, true
// there)": a key path and both values, each shortened to a readable length. Keys only one side has
// are not compared. nullopt when they agree.
std::optional<std::string> settings_difference(const nlohmann::json& ours,
                                               const nlohmann::json& theirs);

// The flag a settings key path stands for ("optimizer.beta_1" -> "--beta_1"; the model's name and
// layout -> "--model"), for the advice that ends a refusal.
std::string settings_flag(const std::string& path);

}  // namespace dtrain
