// A model's shapes and sizes, inferred from its spec alone, before any layer is built or anything
// is allocated: every product is saturating (base/checked_math.h), and a spec that needs more
// memory than the limit is refused at the layer where it does. build_model() runs it first, so
// train, eval, export, predict and every checkpoint's model pass through it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/machine_memory.h"
#include "nn/model_spec.h"

namespace dtrain {

// One layer of the spec. Counts are of float32 values; kSaturatedSize where one passed int64_t.
struct LayerPlan {
  Shape output_shape = {};  // without the batch
  int64_t parameters = 0;   // its kernel's and bias's values
  int64_t activations = 0;  // per example: its output, its activation's and a mask or argmax
  int64_t working = 0;      // per example: scratch of its kernels (Conv2D's im2col columns)
};

struct ModelPlan {
  std::vector<LayerPlan> layers = {};  // one per spec.layers
  int64_t parameters = 0;
  // The least memory any run of the model needs, in bytes: its parameters twice (training holds
  // their gradients beside them; eval, export and predict a checkpoint's copy), and one example's
  // input, activations and working memory. A batch and an optimizer's slots need more.
  int64_t bytes = 0;
};

// Throws UsageError starting with `source` and naming the layer by its index in spec.layers
// ("model.json: layer 2 (Dense 'dense_1'): ...") for a shape the layer does not take (a Dense on a
// non-flat input, a Reshape of the wrong size, a window that does not fit, a dimension or a
// Conv2D patch beyond the 2^31-1 values the kernels index), and TooLargeError naming the layer at
// which bytes pass `limit`, the layer's size and the limit.
ModelPlan plan_model(const ModelSpec& spec, const AllocationLimit& limit,
                     const std::string& source);
// The same against a machine of memory_limit_bytes (machine_allocation_limit).
ModelPlan plan_model(const ModelSpec& spec, uint64_t memory_limit_bytes, const std::string& source);

}  // namespace dtrain
