// The hostile model specs of issue 31 (defect 3), shared by the unit tests of their refusal and
// the end-to-end tests that run dtrain on them: sizes whose products overflow or pass any
// machine's memory, and JSON nested a million levels deep.
#pragma once

#include <cstdint>
#include <string>

#include "nn/model_spec.h"

namespace dtrain::testing {

// 28x28x1 → Conv2D of 32 filters, a 65536x65536 kernel, SAME: its patch, 2^32 values, wrapped
// an int to zero.
inline ModelSpec conv_kernel_65536_squared() {
  return {.name = "hostile_conv",
          .input_shape = {28, 28, 1},
          .layers = {{.kind = LayerKind::kConv2D,
                      .name = "conv",
                      .filters = 32,
                      .kernel_size = {65536, 65536},
                      .padding = Padding::kSame}}};
}

// 784 → Reshape [-1, 2^62, 4]: the known dimensions' product, 2^64, wrapped int64_t to zero.
inline ModelSpec reshape_beyond_int64() {
  return {.name = "hostile_reshape",
          .input_shape = {784},
          .layers = {{.kind = LayerKind::kReshape,
                      .name = "reshape",
                      .target_shape = {-1, int64_t{1} << 62, 4}}}};
}

// 784 → Dense of 10^9 units: 784·10^9 weights, 2.9 TiB.
inline ModelSpec dense_of_a_billion_units() {
  return {.name = "hostile_dense",
          .input_shape = {784},
          .layers = {{.kind = LayerKind::kDense, .name = "dense", .units = 1'000'000'000}}};
}

// 784 → `layers` Dense layers of 100k units: 10^10 weights (37 GiB) each after the first.
inline ModelSpec chain_of_wide_layers(int layers) {
  ModelSpec spec{.name = "hostile_chain", .input_shape = {784}};
  for (int i = 0; i < layers; ++i) {
    spec.layers.push_back(
        {.kind = LayerKind::kDense, .name = "wide_" + std::to_string(i), .units = 100'000});
  }
  return spec;
}

// A Sequential model whose config is `depth` nested arrays: each level is one more recursion
// for whatever copies, compares or prints the value.
inline std::string deeply_nested_model_json(int depth) {
  return R"({"class_name": "Sequential", "config": )" + std::string(depth, '[') +
         std::string(depth, ']') + "}";
}

}  // namespace dtrain::testing
