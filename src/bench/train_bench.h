// `dtrain bench train`: steady-state training throughput of one process on synthetic MNIST-shaped
// batches (the cost of a step does not depend on the pixel values), with the per-step time split
// into forward, backward and optimizer update.
#pragma once

#include <ostream>
#include <string>

#include "base/cpu.h"

namespace dtrain::bench {

struct TrainBenchConfig {
  std::string model = "mnist_inference";
  int hidden_units = 100;
  std::string optimizer;  // empty: the model's recipe
  int batch_size = 100;
  int threads = available_cores();
  int towers = 1;
  double warmup_seconds = 1.0;
  double seconds_per_rep = 1.0;
  int reps = 5;
  std::string conv_kernels = "auto";  // auto | onednn | im2col
  std::string gemm;                   // openblas | onednn; empty: the default library
  std::string precision = "fp32";     // fp32 | bf16 (TrainConfig::precision)
};

// Prints the figures and returns the median examples/sec.
double run_train_bench(const TrainBenchConfig& config, std::ostream& out);

}  // namespace dtrain::bench
