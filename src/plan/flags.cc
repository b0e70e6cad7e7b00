// The refusals and checks derived from the flag table (its rows: plan/flag_table.cc).
#include "plan/flags.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "base/error.h"
#include "plan/run_plan.h"

namespace dtrain {
namespace {

std::string strategy_list(StrategySet set) {
  std::vector<std::string_view> names;
  for (const StrategyKind kind : strategy_kinds()) {
    if ((set & strategy_bit(kind)) != 0) names.push_back(strategy_name(kind));
  }
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

void refuse_flags_foreign_to(const RunPlan& plan, StrategyKind strategy,
                             std::span<const std::string_view> meaningful_here) {
  const StrategySet bit = strategy_bit(strategy);
  for (const FlagSpec& flag : flag_table()) {
    if ((flag.strategies & bit) != 0 || !plan.has(flag.name)) continue;
    if (std::find(meaningful_here.begin(), meaningful_here.end(), flag.name) !=
        meaningful_here.end()) {
      continue;
    }
    if ((flag.hint_under & bit) != 0) {
      throw UsageError(fmt::format(fmt::runtime(flag.hint), flag.name, plan.text_of(flag.name),
                                   strategy_name(strategy)));
    }
    throw UsageError(fmt::format("{}: means nothing under --strategy {}; it applies to {}",
                                 flag.name, strategy_name(strategy),
                                 strategy_list(flag.strategies)));
  }
}

void check_flags(const RunPlan& plan, CheckWhen when, StrategyKind strategy, int cluster_workers) {
  for (const FlagSpec& flag : flag_table()) {
    if (flag.check == nullptr || flag.when != when) continue;
    if (when == CheckWhen::kUnderItsStrategies && (flag.strategies & strategy_bit(strategy)) == 0)
      continue;
    flag.check(plan, cluster_workers);
  }
}

void check_flag(const RunPlan& plan, std::string_view name, int cluster_workers) {
  const FlagSpec* flag = find_flag(name);
  if (flag != nullptr && flag->check != nullptr) flag->check(plan, cluster_workers);
}

}  // namespace dtrain
