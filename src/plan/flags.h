// The one table of `dtrain train` and `dtrain task` flags (DESIGN.md §2a, STYLE.md 24 and 28): per
// flag its name, the field of FlagValues it sets, its help, the strategies under which it means
// something (any other refuses it by name), the check of its value, and where checkpoints record
// it. cli/ declares the options and --help from it; the run plan (plan/run_plan.h) validates and
// refuses through it, and records through it (plan/recorded_settings.h). Adding a flag is a field
// in FlagValues, a row here, and its use.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "plan/flag_values.h"
#include "plan/strategy_kind.h"
#include "train/train_config.h"

namespace dtrain {

struct RunPlan;

template <typename T>
using FieldOf = T FlagValues::*;
// The field a flag sets. monostate: the data flags (--data_format, --compression, ...), declared
// by cli/data_flags.cc for train, eval and predict alike.
using FlagField = std::variant<std::monostate, FieldOf<int>, FieldOf<int64_t>, FieldOf<uint64_t>,
                               FieldOf<float>, FieldOf<double>, FieldOf<bool>, FieldOf<std::string>,
                               FieldOf<std::vector<int64_t>>, FieldOf<std::vector<float>>>;

// A set of strategies, one bit per StrategyKind.
using StrategySet = unsigned;
constexpr StrategySet strategy_bit(StrategyKind kind) { return 1u << static_cast<unsigned>(kind); }
inline constexpr StrategySet kEveryStrategy = 0x1f;
inline constexpr StrategySet kPsStrategies =
    strategy_bit(StrategyKind::kAsync) | strategy_bit(StrategyKind::kSync);
inline constexpr StrategySet kClusterStrategies =
    kPsStrategies | strategy_bit(StrategyKind::kAllreduce);

// When a flag's check runs: with every run's settings (before anything is loaded), under one of
// its strategies once the strategy is known, or only when the local launcher starts a cluster.
enum class CheckWhen { kAlways, kUnderItsStrategies, kLocalLauncher };

// Throws UsageError naming the flag and its value when the plan's value is out of range.
// `cluster_workers`: the workers of the cluster the local launcher is about to start; 0 in one
// task of a cluster, which checks against its cluster spec instead — or, for a row that a task
// runs by name (check_flag), its cluster's workers.
using FlagCheck = void (*)(const RunPlan& plan, int cluster_workers);

// Where a checkpoint records a flag's effective value: the settings after the model's recipe, so
// read from TrainConfig rather than FlagValues (plan/recorded_settings.h derives the JSON), and
// what the resume check makes of a change (train/train_config.h).
struct Recorded {
  std::string_view key{};  // a path into the recorded JSON, levels joined by '.': "data.train_data"
  nlohmann::json (*value)(const TrainConfig& config) = nullptr;  // nullptr: not recorded
  ResumeRule rule = ResumeRule::kCompared;
};

// A Recorded value that is one TrainConfig member as it stands:
// recorded_member<&TrainConfig::seed>.
template <auto kMember>
nlohmann::json recorded_member(const TrainConfig& config) {
  return nlohmann::json(config.*kMember);
}

struct FlagSpec {
  std::string_view name{};   // "--fusion_bytes"
  std::string_view topic{};  // --help's heading over it, one of help_topics(); none when hidden
  FlagField field{};
  std::string_view help{};
  // A model's JSON may default it, under its name without "--" (plan/recipes.h):
  // "dtrain": {"defaults": {"learning_rate": 0.5}}.
  bool recipe = false;
  bool show_default = false;                // --help shows the field's default
  std::vector<std::string_view> choices{};  // the only values accepted, when not empty
  char delimiter = 0;                       // list flags: "1,2,3"
  bool is_switch = false;                   // takes no value
  bool negates = false;                     // a switch that sets its field to false
  bool hidden = false;                      // not in --help (the local launcher's word to tasks)
  StrategySet strategies = kEveryStrategy;  // under which it means something
  // Under the strategies of hint_under the refusal is this instead of the list of strategies:
  // {0} is the flag's name, {1} its value, {2} the strategy.
  StrategySet hint_under = 0;
  std::string_view hint{};
  bool launcher_only = false;  // sizes or supervises the local launcher's cluster
  FlagCheck check = nullptr;
  CheckWhen when = CheckWhen::kAlways;
  // Recorded by every checkpoint when it changes what training computes or what evaluation reads:
  // the resume check compares it and names this flag (train/resume_check.h), and the all-reduce
  // ring agrees on it (train/allreduce_strategy.h).
  Recorded recorded{};
};

// Every flag, in --help's order.
std::span<const FlagSpec> flag_table();
// --help's headings, in its order: what the model is, the data, the training, ... Every row that
// --help shows names one.
std::span<const std::string_view> help_topics();
// The row of `name`; nullptr when there is none.
const FlagSpec* find_flag(std::string_view name);

// Throws UsageError for the first flag given in the plan that means nothing under `strategy`,
// naming it and where it applies; flags in `meaningful_here` are let through.
void refuse_flags_foreign_to(const RunPlan& plan, StrategyKind strategy,
                             std::span<const std::string_view> meaningful_here = {});
// Runs the checks that `when` selects, in table order; kUnderItsStrategies: of the flags that
// mean something under `strategy`.
void check_flags(const RunPlan& plan, CheckWhen when, StrategyKind strategy,
                 int cluster_workers = 0);
// Runs one flag's check.
void check_flag(const RunPlan& plan, std::string_view name, int cluster_workers = 0);

}  // namespace dtrain
