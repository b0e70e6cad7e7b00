// The convolutions of a model's training step, each timed on every implementation that runs its
// shape (oneDNN's primitives, dtrain's direct kernels, im2col's products), in fp32 and, where the
// CPU has bf16 kernels, as --precision bf16 runs them: the convolutions' part of `dtrain bench
// gemm`'s ceilings (bench/gemm_bench.h).
#pragma once

#include <string>
#include <vector>

#include "nn/model.h"

namespace dtrain::bench {

// One Conv2D layer's forward and backward pass (weight, bias and, past the first layer, input
// gradients) for one batch, each pass at its fastest implementation in each precision.
struct ConvTiming {
  std::string layer;  // its weights' name, "conv1_w"
  std::string shape;  // "28x28x1->28x28x32 k5x5"
  double fp32_seconds = 0;
  std::string fp32_implementation;  // "onednn", or forward's / backward's: "onednn / im2col"
  double bf16_seconds = 0;          // 0 when bf16 is not measured
  std::string bf16_implementation;
};

// Times every Conv2D of `model` on the current ThreadTeam: `reps` interleaved rounds of
// `seconds_per_rep` per implementation and precision, the median of each kept.
std::vector<ConvTiming> time_convolutions(const Model& model, int batch, double seconds_per_rep,
                                          int reps, bool bf16);

}  // namespace dtrain::bench
