// Exponential moving average of the parameters, as TensorFlow's tf.train.ExponentialMovingAverage
// with num_updates: after update n, shadow = d·shadow + (1-d)·value with d = min(decay,
// (1+n)/(10+n)), so early averages follow the parameters closely. Evaluating on the shadow values
// often scores better than the raw parameters.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nn/param_set.h"

namespace dtrain {

class MovingAverage {
 public:
  // The shadow starts equal to params; its tensors are named "<var>/ExponentialMovingAverage".
  MovingAverage(float decay, const ParamSet& params);

  // REQUIRES: params has the layout given to the constructor.
  // [begin, end) limits the update to that range of the flat arena (see Optimizer::apply). A
  // tensor that is not trainable (BatchNormalization's moving statistics) is copied, not averaged:
  // evaluation on the shadow uses the statistics training keeps, as TensorFlow's does.
  void update(const ParamSet& params, int64_t num_updates, size_t begin = 0, size_t end = SIZE_MAX);
  // Decay used for update num_updates.
  float decay_at(int64_t num_updates) const;
  // Restarts the average from params (after a restore that lacks shadow values).
  void reset(const ParamSet& params);

  ParamSet& shadow() { return shadow_; }
  const ParamSet& shadow() const { return shadow_; }

 private:
  // shadow -= (1-d)·(shadow - value) over the arena range [begin, end).
  void average(const ParamSet& params, float d, size_t begin, size_t end);

  float decay_;
  ParamSet shadow_;
};

}  // namespace dtrain
