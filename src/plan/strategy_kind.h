// The five training strategies (DESIGN.md §2) as a value: parsed once from --strategy, compared as
// an enum everywhere after.
#pragma once

#include <span>
#include <string_view>

namespace dtrain {

enum class StrategyKind { kLocal, kTowers, kAsync, kSync, kAllreduce };

// "local", "towers", "async", "sync", "allreduce": the values of --strategy.
std::string_view strategy_name(StrategyKind kind);
// Every kind, in the order --help lists them.
std::span<const StrategyKind> strategy_kinds();
// Throws UsageError naming the value and listing the strategies when `name` is none of them.
StrategyKind parse_strategy(std::string_view name);

// async and sync: workers push to and pull from parameter servers.
inline bool is_ps(StrategyKind kind) {
  return kind == StrategyKind::kAsync || kind == StrategyKind::kSync;
}
// The strategies that train in several processes.
inline bool is_distributed(StrategyKind kind) {
  return is_ps(kind) || kind == StrategyKind::kAllreduce;
}

}  // namespace dtrain
