#include "train/nonfinite_guard.h"

#include <spdlog/spdlog.h>

namespace dtrain {

void NonFiniteGuard::refuse(const Refusal& refusal) {
  ++refused_;
  spdlog::warn("{}{}: {} holds a NaN or an infinity ({} so far); {}", prefix_, refusal.action,
               refusal.subject, refused_, refusal.consequence);
}

}  // namespace dtrain
