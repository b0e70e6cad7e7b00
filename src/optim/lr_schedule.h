// Learning-rate schedules, as tf.keras.optimizers.schedules defines them, and a linear warmup that
// composes with any of them. With s the global step:
//   exponential  base · decay_rate^(s / decay_steps), the exponent floored when staircase
//                (ExponentialDecay, tf.train.exponential_decay)
//   cosine       base · ((1 − alpha) · ½(1 + cos(π · min(s, decay_steps) / decay_steps)) + alpha)
//                (CosineDecay)
//   piecewise    values[i] where boundaries[i−1] < s ≤ boundaries[i]: values[0] up to and
//                including boundaries[0], the last value after the last boundary
//                (PiecewiseConstantDecay)
//   warmup       the rate above times min(1, s / warmup_steps), so it rises linearly from 0 over
//                the first warmup_steps steps; the schedule itself keeps counting global steps.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dtrain {

enum class LrDecay { kExponential, kCosine, kPiecewise };

struct LrSchedule {
  float base = 0.01f;       // exponential and cosine; piecewise takes its rates from values
  float decay_rate = 1.0f;  // exponential; 1 disables decay
  int64_t decay_steps = 0;  // exponential: the period of decay_rate; cosine: steps to reach alpha
  bool staircase = true;    // exponential
  LrDecay decay = LrDecay::kExponential;
  float alpha = 0.0f;                    // cosine: the final rate as a fraction of base
  std::vector<int64_t> boundaries = {};  // piecewise: strictly increasing global steps
  std::vector<float> values = {};        // piecewise: boundaries.size() + 1 rates
  int64_t warmup_steps = 0;              // 0: no warmup

  // REQUIRES: for piecewise, values.size() == boundaries.size() + 1.
  float at(int64_t step) const;
  // For the configuration line and the run's records: "cosine from 0.1 to 0 over 5500 steps,
  // linear warmup over 100 steps".
  std::string describe() const;
};

const char* lr_decay_name(LrDecay decay);

}  // namespace dtrain
