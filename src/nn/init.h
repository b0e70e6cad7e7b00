// Parameter initialisers. Truncated normal follows TensorFlow's tf.truncated_normal: draws from
// N(0, stddev²) and redraws any value more than two standard deviations from the mean.
#pragma once

#include <cstdint>
#include <span>

#include "nn/param_set.h"

namespace dtrain {

// Initialises every tensor as its ParamSpec says. Each tensor draws from its own stream, seeded
// from (seed, tensor index), so the result does not depend on the order of initialisation.
void initialize_params(ParamSet& params, uint64_t seed);

void fill_truncated_normal(std::span<float> values, float stddev, uint64_t seed);

}  // namespace dtrain
