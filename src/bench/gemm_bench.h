// `dtrain bench gemm`: the machine's ceiling for a model's matrix products. Records the products
// one training step of the model makes (their shapes, layouts and splits, through gemm()'s
// observer), then times each on OpenBLAS and on oneDNN, rounds interleaved, on a team of the
// given threads as training runs them. The ceiling is the step's products each at the faster
// library; `bench train`'s examples/sec set against it says what fraction of the machine a step
// reaches. Where the CPU has bf16 kernels, each product is timed under --precision bf16 too.
// Convolutions, which oneDNN's and the direct kernels compute outside gemm(), are timed layer by
// layer on each implementation that runs them (bench/conv_bench.h), and the ceilings hold each at
// its fastest.
#pragma once

#include <ostream>
#include <string>

#include "base/cpu.h"

namespace dtrain::bench {

struct GemmBenchConfig {
  std::string model = "mnist_inference";
  int hidden_units = 100;
  int batch_size = 100;
  int threads = available_cores();
  double seconds_per_rep = 0.2;  // per product, library and round
  int reps = 5;
};

struct GemmCeiling {
  double openblas_examples_per_second = 0;  // the step's products on OpenBLAS alone
  double onednn_examples_per_second = 0;    // on oneDNN alone
  double best_examples_per_second = 0;      // each product on the faster
  // The step's products on oneDNN's bf16 matmul (--precision bf16's products, their operands'
  // conversions included); 0 where the CPU has no bf16 kernels.
  double bf16_examples_per_second = 0;
};

// Prints a line per product and the ceilings, and returns them.
GemmCeiling run_gemm_bench(const GemmBenchConfig& config, std::ostream& out);

}  // namespace dtrain::bench
