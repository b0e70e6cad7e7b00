// Shape-only and elementwise layers: ReLU and Flatten.
#pragma once

#include "nn/layer.h"

namespace dtrain {

// out = max(in, 0) elementwise.
class Relu : public Layer {
 public:
  explicit Relu(Shape shape) : shape_(std::move(shape)) {}
  std::string describe() const override;
  Shape input_shape() const override { return shape_; }
  Shape output_shape() const override { return shape_; }
  void forward(const ParamSet& params, const LayerIo& io) const override;
  void backward(const ParamSet& params, GradSet& grads, const LayerIo& io, const float* dout,
                float* din) const override;

 private:
  Shape shape_;
};

// (N, d1, d2, ...) -> (N, d1·d2·...); storage is already contiguous, so this is a copy.
class Flatten : public Layer {
 public:
  explicit Flatten(Shape input_shape) : shape_(std::move(input_shape)) {}
  std::string describe() const override;
  Shape input_shape() const override { return shape_; }
  Shape output_shape() const override { return {num_elements(shape_)}; }
  void forward(const ParamSet& params, const LayerIo& io) const override;
  void backward(const ParamSet& params, GradSet& grads, const LayerIo& io, const float* dout,
                float* din) const override;

 private:
  Shape shape_;
};

}  // namespace dtrain
