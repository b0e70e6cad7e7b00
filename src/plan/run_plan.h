// A run plan (DESIGN.md §2a): everything `dtrain train` or `dtrain task` was told, resolved once —
// the strategy, the training settings with the model's recipe filling what the flags left out,
// the cluster and launch settings, and what to do with an earlier run's checkpoint. The CLI builds
// one from argv, tests build one directly; plan/run.h runs it.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "plan/flag_values.h"
#include "plan/strategy_kind.h"
#include "train/resume_check.h"
#include "train/train_config.h"

namespace dtrain {

enum class Command { kTrain, kTask };

struct RunPlan {
  Command command = Command::kTrain;
  StrategyKind strategy = StrategyKind::kLocal;
  TrainConfig config;
  ResumeMode resume = ResumeMode::kDefault;
  FlagValues flags;  // as given, with the defaults of those that were not
  // The flags on the command line, each with its value as typed ("" for a switch).
  std::map<std::string, std::string, std::less<>> given;
  // The command line after the command's name: the local launcher passes it on to its tasks.
  std::vector<std::string> arguments;

  bool has(std::string_view flag) const { return given.find(flag) != given.end(); }
  // The value of a given flag as typed; "" when it was not given.
  std::string text_of(std::string_view flag) const;
};

// The plan of these flags: the strategy parsed, the training settings of the model's recipe with
// the given flags applied, and every check that holds under any strategy run (plan/flags.h). Reads
// only the model's file, if --model names one. Throws UsageError naming the first flag at fault.
RunPlan make_plan(Command command, const FlagValues& flags,
                  std::map<std::string, std::string, std::less<>> given,
                  std::vector<std::string> arguments = {});

// The examples one global step trains on under `kind` with `workers` training workers
// (TrainConfig::global_batch): --batch_size times every worker under allreduce, times
// --replicas_to_aggregate (0: every worker) under sync, and one batch otherwise.
int global_batch_of(const RunPlan& plan, StrategyKind kind, int workers);

// The checks of plan/flags.h that hold under any strategy, on these settings alone. Throws
// UsageError naming the first flag out of range.
void validate_train_config(const TrainConfig& config);

}  // namespace dtrain
