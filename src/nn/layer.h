// The layer interface: a forward/backward pair over a batch. Shapes exclude the batch dimension: a
// layer maps (N, input_shape...) to (N, output_shape...). Layers are immutable once built and read
// their parameters from a ParamSet passed in, so several towers may run one Model concurrently,
// each with its own Workspace and GradSet.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nn/param_set.h"
#include "tensor/tensor.h"

namespace dtrain {

// Buffers of one layer for one step. `scratch` holds scratch_floats(batch) floats that survive from
// forward to backward of the same step (im2col columns, pooling argmax, dropout mask, ...).
// `training` is false for evaluation and prediction, where no layer may draw at random. A layer
// that draws (Dropout) draws from (seed, first_example + row, position) only, so towers that split
// a batch, and a run restarted at a step, draw exactly what one tower would have.
struct LayerIo {
  int batch = 0;
  const float* in = nullptr;  // (batch, input_shape)
  float* out = nullptr;       // (batch, output_shape)
  float* scratch = nullptr;
  bool training = false;
  uint64_t seed = 0;          // the step's seed, already mixed with the layer's index
  int64_t first_example = 0;  // index of row 0 in the whole step's batch
};

class Layer {
 public:
  virtual ~Layer() = default;

  // One line such as "dense 784->500" for the start-up table.
  virtual std::string describe() const = 0;
  virtual Shape input_shape() const = 0;
  virtual Shape output_shape() const = 0;
  // Parameters this layer owns, in the order the model declares them.
  virtual std::vector<ParamSpec> param_specs() const { return {}; }
  virtual size_t scratch_floats(int /*batch*/) const { return 0; }
  // Which implementation computes this layer, where it has a choice (Conv2D), for the
  // configuration line; "" elsewhere.
  virtual std::string kernels() const { return ""; }

  // REQUIRES: set_first_param() was called with the index of param_specs()[0] in the ParamSet.
  virtual void forward(const ParamSet& params, const LayerIo& io) const = 0;
  // Given dout = dLoss/dout, writes (not accumulates) this layer's parameter gradients into grads
  // (for a statistic, ParamSpec::trainable false, the delta it is assigned) and, when din is not
  // null, dLoss/din. io holds the same buffers as the forward call.
  virtual void backward(const ParamSet& params, GradSet& grads, const LayerIo& io,
                        const float* dout, float* din) const = 0;
  // Backward and one plain SGD step of this layer's parameters (value -= lr·gradient, L2 term
  // included; a statistic's value -= delta) in one; din comes from the values before the step.
  // grads is scratch. The default goes through grads; Dense folds the step into its weight-gradient
  // GEMM, so that gradient is never written out and read back.
  virtual void backward_sgd_step(ParamSet& params, GradSet& grads, const LayerIo& io,
                                 const float* dout, float* din, float lr) const;

  // A warning about what training left in this layer's statistics after `updates` updates of
  // them (the global step), as one line, or "" when there is none to give: BatchNormalization's
  // moving statistics that are still mostly their initial values.
  virtual std::string statistics_warning(const ParamSet& /*params*/, int64_t /*updates*/) const {
    return "";
  }

  // Called once by the Model with the index of param_specs()[0] in its ParamSet.
  void set_first_param(size_t index) {
    first_param_ = index;
    num_params_ = param_specs().size();
  }

 protected:
  // Writes l2·w into the gradient of parameter `index` if its spec's l2 is not 0 and returns 1,
  // else returns 0: the beta for the GEMM that then adds the data term, so L2 costs one pass and
  // BLAS never zeroes the output first.
  float start_weight_gradient(const ParamSet& params, GradSet& grads, size_t index) const;
  // The L2 coefficient of parameter `index` (ParamSpec::l2, TensorFlow's convention).
  float l2_for(const ParamSet& params, size_t index) const { return params.spec(index).l2; }

  size_t first_param_ = 0;
  size_t num_params_ = 0;
};

}  // namespace dtrain
