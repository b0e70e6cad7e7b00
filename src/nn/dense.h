// Dense (fully connected) layer: out = in · w + b, with w of shape (in_features, out_features) as
// in TensorFlow's tutorials, so checkpoints name and lay out variables the way those programs do.
#pragma once

#include "nn/layer.h"

namespace dtrain {

struct DenseOptions {
  int in_features = 0;
  int out_features = 0;
  std::string weight_name;     // e.g. "hid_w"
  std::string bias_name;       // e.g. "hid_b"
  float weight_stddev = 0.1f;  // truncated normal; 0 initialises the weights to zero
  float bias_init = 0.0f;
};

class Dense : public Layer {
 public:
  explicit Dense(DenseOptions options);
  std::string describe() const override;
  Shape input_shape() const override { return {options_.in_features}; }
  Shape output_shape() const override { return {options_.out_features}; }
  std::vector<ParamSpec> param_specs() const override;
  void forward(const ParamSet& params, const LayerIo& io) const override;
  void backward(const ParamSet& params, GradSet& grads, const LayerIo& io, const float* dout,
                float* din) const override;
  void backward_sgd_step(ParamSet& params, GradSet& grads, const LayerIo& io, const float* dout,
                         float* din, float lr) const override;

 private:
  // db = Σ_rows dout, into db (out_features).
  void bias_gradient(int n, const float* dout, float* db) const;
  // din = dout·w.
  void input_gradient(const ParamSet& params, int n, const float* dout, float* din) const;

  DenseOptions options_;
};

}  // namespace dtrain
