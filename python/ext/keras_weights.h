// A model's weights as Keras lists them — each layer's get_weights(), layer after layer: Dense's
// kernel (in, out) and bias, Conv2D's kernel (kh, kw, in, out) and bias, BatchNormalization's
// gamma, beta, moving mean and moving variance. dtrain keeps a Dense kernel (out, in) (the rows
// its products read), so that one travels transposed; the others are Keras's layouts already.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "nn/model_spec.h"
#include "nn/param_set.h"

namespace dtrain::python {

struct KerasWeight {
  std::string name;         // dtrain's parameter ("hidden/kernel"), as checkpoints name it
  Shape shape;              // Keras's
  bool transposed = false;  // dtrain's is the (out, in) transpose of Keras's (in, out)
  size_t layer = 0;         // its layer's index in spec.layers
  bool trainable = true;
};

// The weights of `spec`'s layers in Keras's order, each a parameter of `params` (the built
// model's param_specs()). Throws std::logic_error where a layer's parameter is missing.
std::vector<KerasWeight> keras_weights(const ModelSpec& spec, const std::vector<ParamSpec>& params);

// A (rows, columns) row-major matrix's transpose, (columns, rows).
std::vector<float> transposed(const std::vector<float>& values, int64_t rows, int64_t columns);

}  // namespace dtrain::python
