// The push outcomes' names and the checks a pushed gradient passes before it is counted.
#include "ps/push_result.h"

#include <bit>
#include <cmath>

namespace dtrain {

std::string_view outcome_name(PushResult::Outcome outcome) {
  switch (outcome) {
    case PushResult::Outcome::kApplied:
      return "applied";
    case PushResult::Outcome::kAccepted:
      return "accepted";
    case PushResult::Outcome::kDuplicate:
      return "duplicate";
    case PushResult::Outcome::kStale:
      return "stale";
    case PushResult::Outcome::kRejected:
      return "rejected";
  }
  return "unknown";
}

bool usable_learning_rate(float lr) { return std::isfinite(lr) && lr >= 0; }

// A NaN or an infinity is a float whose exponent bits are all set. Integer tests, so that the
// compiler vectorises the loop; a sum of floats (tensor/ops.h's all_finite) is a chain it may not
// reorder, one add after another, which on a ps fed through memory was a fifth of a push's time.
bool finite_gradient(std::span<const float> grad) {
  constexpr uint32_t kExponent = 0x7f800000;
  uint32_t non_finite = 0;
  for (const float v : grad) {
    const auto bits = std::bit_cast<uint32_t>(v);
    non_finite |= static_cast<uint32_t>((bits & kExponent) == kExponent);
  }
  return non_finite == 0;
}

}  // namespace dtrain
