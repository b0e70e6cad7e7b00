// 2-D max pooling over NHWC activations with TensorFlow's SAME padding, as in the deep MNIST
// tutorial's max_pool_2x2. Padding never wins a max: an edge window takes the max of its valid
// inputs.
#pragma once

#include "nn/layer.h"

namespace dtrain {

struct MaxPool2DOptions {
  int height = 0;  // input H
  int width = 0;   // input W
  int channels = 0;
  int window = 2;  // square window
  int stride = 2;
};

// in is (N, H, W, C), out is (N, ceil(H/stride), ceil(W/stride), C) — SAME padding. For even H and
// W with window = stride = 2 that equals VALID (no padding); for odd sizes the last row (column) of
// windows hangs over the edge and pools only the inputs it covers.
// Scratch: for every output, the index within its image of the input that won (float-encoded, exact
// because the constructor bounds H·W·C by 2^24). Ties go to the first maximum in (h, w) order.
class MaxPool2D : public Layer {
 public:
  // Throws Error when a size is not positive or an image is too large to index in a float.
  explicit MaxPool2D(MaxPool2DOptions options);
  std::string describe() const override;
  Shape input_shape() const override;
  Shape output_shape() const override;
  size_t scratch_floats(int batch) const override;
  void forward(const ParamSet& params, const LayerIo& io) const override;
  void backward(const ParamSet& params, GradSet& grads, const LayerIo& io, const float* dout,
                float* din) const override;

 private:
  MaxPool2DOptions options_;
  int out_height_ = 0;
  int out_width_ = 0;
  int pad_top_ = 0;  // TensorFlow's SAME: the smaller half of the padding goes before
  int pad_left_ = 0;
};

}  // namespace dtrain
