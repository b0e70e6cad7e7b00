// Learning-rate schedules: each formula is the one its header quotes from tf.keras.
#include "optim/lr_schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

namespace dtrain {
namespace {

double exponential(const LrSchedule& s, int64_t step) {
  if (s.decay_steps <= 0 || s.decay_rate == 1.0f) return s.base;
  double exponent = static_cast<double>(step) / static_cast<double>(s.decay_steps);
  if (s.staircase) exponent = std::floor(exponent);
  return s.base * std::pow(static_cast<double>(s.decay_rate), exponent);
}

double cosine(const LrSchedule& s, int64_t step) {
  if (s.decay_steps <= 0) return s.base;
  const double fraction =
      static_cast<double>(std::min(step, s.decay_steps)) / static_cast<double>(s.decay_steps);
  const double cosine_decay = 0.5 * (1.0 + std::cos(std::numbers::pi * fraction));
  return s.base * ((1.0 - s.alpha) * cosine_decay + s.alpha);
}

double piecewise(const LrSchedule& s, int64_t step) {
  // The first boundary at or above the step: Keras's `step <= boundary` picks values[i].
  const auto at = std::lower_bound(s.boundaries.begin(), s.boundaries.end(), step);
  return s.values[static_cast<size_t>(at - s.boundaries.begin())];
}

}  // namespace

const char* lr_decay_name(LrDecay decay) {
  switch (decay) {
    case LrDecay::kExponential:
      return "exponential";
    case LrDecay::kCosine:
      return "cosine";
    case LrDecay::kPiecewise:
      return "piecewise";
  }
  return "?";
}

float LrSchedule::at(int64_t step) const {
  double lr = 0;
  switch (decay) {
    case LrDecay::kExponential:
      lr = exponential(*this, step);
      break;
    case LrDecay::kCosine:
      lr = cosine(*this, step);
      break;
    case LrDecay::kPiecewise:
      lr = piecewise(*this, step);
      break;
  }
  if (warmup_steps > 0 && step < warmup_steps)
    lr *= static_cast<double>(step) / static_cast<double>(warmup_steps);
  return static_cast<float>(lr);
}

std::string LrSchedule::describe() const {
  std::string text;
  switch (decay) {
    case LrDecay::kExponential:
      text = decay_steps <= 0 || decay_rate == 1.0f
                 ? fmt::format("{} constant", base)
                 : fmt::format("{} exponential decay {} per {} steps{}", base, decay_rate,
                               decay_steps, staircase ? " (staircase)" : "");
      break;
    case LrDecay::kCosine:
      text = fmt::format("{} cosine decay to {} over {} steps", base, base * alpha, decay_steps);
      break;
    case LrDecay::kPiecewise:
      text = "piecewise";
      for (size_t i = 0; i < boundaries.size(); ++i)
        text += fmt::format(" {} to step {},", values[i], boundaries[i]);
      text += fmt::format(" then {}", values.back());
      break;
  }
  if (warmup_steps > 0) text += fmt::format(", linear warmup over {} steps", warmup_steps);
  return text;
}

}  // namespace dtrain
