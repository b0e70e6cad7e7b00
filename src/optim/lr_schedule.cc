// Exponential learning-rate decay.
#include "optim/lr_schedule.h"

#include <cmath>

namespace dtrain {

float LrSchedule::at(int64_t step) const {
  if (decay_steps <= 0 || decay_rate == 1.0f) return base;
  double exponent = static_cast<double>(step) / static_cast<double>(decay_steps);
  if (staircase) exponent = std::floor(exponent);
  return static_cast<float>(base * std::pow(static_cast<double>(decay_rate), exponent));
}

}  // namespace dtrain
