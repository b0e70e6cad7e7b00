// Keras' BatchNormalization over the last axis (channels last): in training, each channel is
// normalised by the batch's mean and variance and the moving statistics follow them; in
// evaluation and prediction, the moving statistics normalise instead.
#pragma once

#include "nn/layer.h"

namespace dtrain {

struct BatchNormOptions {
  Shape shape;  // in = out; its last dimension is the channels, the rest (and the batch) are rows
  float momentum = 0.99f;
  float epsilon = 1e-3f;
  // Keras' parameter names: gamma and beta exist only with scale and center.
  std::string gamma_name;  // empty: no scale (gamma is 1)
  std::string beta_name;   // empty: no centre (beta is 0)
  std::string moving_mean_name;
  std::string moving_variance_name;
  InitSpec gamma_init = {.kind = InitKind::kOnes};
  InitSpec beta_init = InitSpec::zeros();
  InitSpec moving_mean_init = InitSpec::zeros();
  InitSpec moving_variance_init = {.kind = InitKind::kOnes};
};

// in and out are (M, C) with M = N·(product of the shape but its last dimension), C = channels.
// Training:   out = gamma·(in - mean)·inv_std + beta, mean and var the batch's per channel (var
//             biased, as Keras 3's ops.moments), inv_std = 1/sqrt(var + epsilon).
// Evaluation: the same with moving_mean and moving_variance in place of mean and var.
// The moving statistics are parameters with ParamSpec::trainable false (see param_set.h): backward
// writes (1 - momentum)·(moving - batch statistic) into their gradient slots, the delta that
// value -= delta turns into Keras' moving = momentum·moving + (1 - momentum)·batch statistic.
// Averaged like any gradient, it averages the batch statistics over towers and workers.
// Scratch: 6·C floats (the batch's mean, variance and inv_std, and sums for backward).
class BatchNorm : public Layer {
 public:
  // Throws Error for an empty shape or a momentum outside [0, 1] or an epsilon not above 0.
  explicit BatchNorm(BatchNormOptions options);
  std::string describe() const override;
  Shape input_shape() const override { return options_.shape; }
  Shape output_shape() const override { return options_.shape; }
  std::vector<ParamSpec> param_specs() const override;
  size_t scratch_floats(int batch) const override;
  void forward(const ParamSet& params, const LayerIo& io) const override;
  // REQUIRES: the forward of this step ran with io.training.
  void backward(const ParamSet& params, GradSet& grads, const LayerIo& io, const float* dout,
                float* din) const override;
  // After n updates the moving variance still holds momentum^n of its initial value v0 (Keras'
  // rule, which does not debias): a warning when that is, averaged over the channels, at least
  // half the variance evaluation divides by. Only for a constant v0 (Keras' Ones).
  std::string statistics_warning(const ParamSet& params, int64_t updates) const override;

 private:
  int64_t channels() const { return options_.shape.back(); }
  int64_t rows(int batch) const { return batch * num_elements(options_.shape) / channels(); }
  bool has_gamma() const { return !options_.gamma_name.empty(); }
  bool has_beta() const { return !options_.beta_name.empty(); }
  // Indices into the ParamSet of the moving statistics.
  size_t moving_mean_index() const;
  size_t moving_variance_index() const { return moving_mean_index() + 1; }

  BatchNormOptions options_;
};

}  // namespace dtrain
