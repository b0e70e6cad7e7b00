// Exponential moving average over the flat arena.
#include "optim/moving_average.h"

#include <algorithm>

namespace dtrain {
namespace {

std::vector<ParamSpec> shadow_specs(const ParamSet& params) {
  std::vector<ParamSpec> specs = params.specs();
  for (ParamSpec& s : specs) s.name += "/ExponentialMovingAverage";
  return specs;
}

}  // namespace

MovingAverage::MovingAverage(float decay, const ParamSet& params)
    : decay_(decay), shadow_(shadow_specs(params)) {
  shadow_.copy_from(params);
}

float MovingAverage::decay_at(int64_t num_updates) const {
  const double n = static_cast<double>(num_updates);
  return static_cast<float>(std::min<double>(decay_, (1.0 + n) / (10.0 + n)));
}

void MovingAverage::update(const ParamSet& params, int64_t num_updates, size_t begin, size_t end) {
  const float d = decay_at(num_updates);
  end = std::min(end, shadow_.flat().size());
  // shadow -= (1-d)·(shadow - value), TensorFlow's assign_moving_average form; a statistic's
  // shadow is its value (decay 0), as TensorFlow averages the trainable variables only and
  // restores the others as they are.
  split_at_statistics(
      params, begin, end, [&](size_t lo, size_t hi) { average(params, d, lo, hi); },
      [&](size_t lo, size_t hi) {
        std::copy_n(params.flat().data() + lo, hi - lo, shadow_.flat().data() + lo);
      });
}

void MovingAverage::average(const ParamSet& params, float d, size_t begin, size_t end) {
  if (begin >= end) return;
  std::span<float> shadow = shadow_.flat().subspan(begin, end - begin);
  std::span<const float> value = params.flat().subspan(begin, end - begin);
  float* __restrict s = shadow.data();
  const float* __restrict v = value.data();
  for (size_t i = 0; i < shadow.size(); ++i) s[i] -= (1.0f - d) * (s[i] - v[i]);
}

void MovingAverage::reset(const ParamSet& params) { shadow_.copy_from(params); }

}  // namespace dtrain
