// 2-D convolution in TensorFlow's (and Keras') layout: NHWC activations, (KH, KW, C_in, C_out)
// filters, any strides, SAME or VALID padding, so a checkpoint names and lays out variables the
// way tf.nn.conv2d programs (the deep MNIST tutorial's lenet) do.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>

#include "nn/conv_kernels.h"
#include "nn/layer.h"

namespace dtrain {

// TensorFlow's two paddings. SAME: the output has ceil(H/S) rows, and the total padding
// max((OH-1)·S + K - H, 0) is split with the smaller half before. VALID: no padding, the output
// has floor((H-K)/S) + 1 rows.
enum class Padding { kValid, kSame };

// Output size and padding-before of one dimension, or -1 outputs when VALID does not fit.
struct AxisGeometry {
  int out = 0;
  int pad_before = 0;
};
// Inline, so that a model's shapes can be inferred (nn/model_plan.h) without the kernels. Computed
// in 64 bits: in + stride and (out - 1)·stride + window can pass INT_MAX for sizes that fit an int.
// REQUIRES: in, window and stride are positive.
inline AxisGeometry axis_geometry(int in, int window, int stride, Padding padding) {
  const int64_t in64 = in, window64 = window, stride64 = stride;
  if (padding == Padding::kValid) {
    return {in >= window ? static_cast<int>((in64 - window64) / stride64 + 1) : -1, 0};
  }
  const int64_t out = (in64 + stride64 - 1) / stride64;
  const int64_t total = std::max<int64_t>((out - 1) * stride64 + window64 - in64, 0);
  return {static_cast<int>(out), static_cast<int>(total / 2)};
}

struct Conv2DOptions {
  int height = 0;  // input H
  int width = 0;   // input W
  int in_channels = 0;
  int out_channels = 0;
  int kernel_height = 5;
  int kernel_width = 5;
  int stride_height = 1;
  int stride_width = 1;
  Padding padding = Padding::kSame;
  std::string weight_name;  // e.g. "conv1_w"
  std::string bias_name;    // e.g. "conv1_b"; empty: the layer has no bias
  InitSpec weight_init = InitSpec::truncated_normal(0.1f);
  InitSpec bias_init = InitSpec::constant(0.1f);  // as in TensorFlow's deep MNIST tutorial
  float weight_l2 = 0.0f;                         // ParamSpec::l2 of the weights
  ConvImplementation implementation = ConvImplementation::kAuto;
};

// in is (N, H, W, C_in), w is (KH, KW, C_in, C_out), b is (C_out), out is (N, OH, OW, C_out).
// Output (oh, ow) reads input rows oh·SH - pad_top + [0, KH) and columns ow·SW - pad_left +
// [0, KW); rows and columns outside the image read zero.
// The arithmetic runs in ConvKernels (conv_kernels.h), chosen once per layer; it needs no scratch
// that lives from forward to backward.
class Conv2D : public Layer {
 public:
  // Throws Error naming the layer when a size or stride is not positive or a VALID kernel is
  // larger than the image.
  explicit Conv2D(Conv2DOptions options);
  std::string describe() const override;
  Shape input_shape() const override;
  Shape output_shape() const override;
  std::vector<ParamSpec> param_specs() const override;
  std::string kernels() const override { return kernels_->name(); }
  // The geometry its kernels run, and the name of its weights ("conv1_w"): for benchmarks that
  // time the layer's convolutions on each implementation (bench/conv_bench.h).
  const ConvShape& conv_shape() const { return shape_; }
  const std::string& weight_name() const { return options_.weight_name; }
  void forward(const ParamSet& params, const LayerIo& io) const override;
  void backward(const ParamSet& params, GradSet& grads, const LayerIo& io, const float* dout,
                float* din) const override;

 private:
  bool has_bias() const { return !options_.bias_name.empty(); }

  Conv2DOptions options_;
  AxisGeometry rows_;
  AxisGeometry cols_;
  ConvShape shape_;
  std::unique_ptr<const ConvKernels> kernels_;
};

}  // namespace dtrain
