// Learning-rate schedules. Exponential decay is TensorFlow's tf.train.exponential_decay:
//   lr(step) = base · decay_rate^(step / decay_steps), the exponent floored when staircase.
#pragma once

#include <cstdint>

namespace dtrain {

struct LrSchedule {
  float base = 0.01f;
  float decay_rate = 1.0f;  // 1 disables decay
  int64_t decay_steps = 0;  // 0 disables decay
  bool staircase = true;

  float at(int64_t step) const;
};

}  // namespace dtrain
