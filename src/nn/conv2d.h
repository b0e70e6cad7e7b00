// 2-D convolution in TensorFlow's layout: NHWC activations, (KH, KW, C_in, C_out) filters, SAME
// padding, so a checkpoint names and lays out variables the way tf.nn.conv2d programs (the deep
// MNIST tutorial's lenet) do. Computed as im2col + one GEMM; not a direct or Winograd kernel.
#pragma once

#include "nn/layer.h"

namespace dtrain {

struct Conv2DOptions {
  int height = 0;  // input H
  int width = 0;   // input W
  int in_channels = 0;
  int out_channels = 0;
  int kernel = 5;  // KH = KW
  // Only stride 1 is implemented; the constructor rejects anything else. Padding is always SAME:
  // with stride 1 the output has the input's H and W.
  int stride = 1;
  std::string weight_name;     // e.g. "conv1_w"
  std::string bias_name;       // e.g. "conv1_b"
  float weight_stddev = 0.1f;  // truncated normal; 0 initialises the weights to zero
  float bias_init = 0.1f;      // constant, as in TensorFlow's deep MNIST tutorial
};

// in is (N, H, W, C_in), w is (KH, KW, C_in, C_out), b is (C_out), out is (N, H, W, C_out).
// SAME padding follows TensorFlow: KH-1 rows of zeros in all, (KH-1)/2 of them above and the rest
// below (likewise for columns), so an even kernel pads one more row below than above.
// Scratch: the im2col matrix of the whole batch, (N·H·W, KH·KW·C_in), written by forward and read
// by backward, then the input gradient's columns for a few images at a time: scratch_floats(N) =
// (N + min(N, 4))·H·W·KH·KW·C_in.
class Conv2D : public Layer {
 public:
  // Throws Error naming the layer when a size is not positive or stride is not 1.
  explicit Conv2D(Conv2DOptions options);
  std::string describe() const override;
  Shape input_shape() const override;
  Shape output_shape() const override;
  std::vector<ParamSpec> param_specs() const override;
  size_t scratch_floats(int batch) const override;
  void forward(const ParamSet& params, const LayerIo& io) const override;
  void backward(const ParamSet& params, GradSet& grads, const LayerIo& io, const float* dout,
                float* din) const override;

 private:
  // Columns of one output pixel: KH·KW·C_in.
  int patch_size() const;
  void im2col(const float* in, int batch, float* cols) const;
  void col2im_add(const float* cols, int batch, float* din) const;

  Conv2DOptions options_;
  int pad_ = 0;  // zero rows above (and columns left of) the input
};

}  // namespace dtrain
