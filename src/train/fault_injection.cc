#include "train/fault_injection.h"

#include <algorithm>
#include <limits>

namespace dtrain {

bool inject_nonfinite_gradient(const TrainConfig& config, int64_t local_step, GradSet& grads) {
  const auto& steps = config.nonfinite_gradient_steps;
  if (grads.flat().empty() || std::find(steps.begin(), steps.end(), local_step) == steps.end())
    return false;
  // The middle of the arena: a value a shard boundary or a fusion bucket does not favour.
  grads.flat()[grads.flat().size() / 2] = std::numeric_limits<float>::quiet_NaN();
  return true;
}

}  // namespace dtrain
