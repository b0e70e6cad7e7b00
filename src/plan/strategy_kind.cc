// Names of the strategies.
#include "plan/strategy_kind.h"

#include <fmt/format.h>

#include <array>

#include "base/error.h"

namespace dtrain {
namespace {

constexpr std::array kKinds = {StrategyKind::kLocal, StrategyKind::kTowers, StrategyKind::kAsync,
                               StrategyKind::kSync, StrategyKind::kAllreduce};

}  // namespace

std::string_view strategy_name(StrategyKind kind) {
  switch (kind) {
    case StrategyKind::kLocal:
      return "local";
    case StrategyKind::kTowers:
      return "towers";
    case StrategyKind::kAsync:
      return "async";
    case StrategyKind::kSync:
      return "sync";
    case StrategyKind::kAllreduce:
      return "allreduce";
  }
  return "local";
}

std::span<const StrategyKind> strategy_kinds() { return kKinds; }

StrategyKind parse_strategy(std::string_view name) {
  for (const StrategyKind kind : kKinds) {
    if (strategy_name(kind) == name) return kind;
  }
  throw UsageError(fmt::format(
      "--strategy {}: unknown; choose one of local, towers, async, sync, allreduce", name));
}

}  // namespace dtrain
