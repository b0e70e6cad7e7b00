// Conv2D: geometry, parameters and the hand-off to its ConvKernels.
#include "nn/conv2d.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/error.h"

namespace dtrain {

Conv2D::Conv2D(Conv2DOptions options) : options_(std::move(options)) {
  const Conv2DOptions& o = options_;
  if (o.height <= 0 || o.width <= 0 || o.in_channels <= 0 || o.out_channels <= 0 ||
      o.kernel_height <= 0 || o.kernel_width <= 0 || o.stride_height <= 0 || o.stride_width <= 0) {
    throw Error(
        fmt::format("conv2d '{}': sizes must be positive (height {}, width {}, in_channels {}, "
                    "out_channels {}, kernel {}x{}, strides {}x{})",
                    o.weight_name, o.height, o.width, o.in_channels, o.out_channels,
                    o.kernel_height, o.kernel_width, o.stride_height, o.stride_width));
  }
  rows_ = axis_geometry(o.height, o.kernel_height, o.stride_height, o.padding);
  cols_ = axis_geometry(o.width, o.kernel_width, o.stride_width, o.padding);
  if (rows_.out <= 0 || cols_.out <= 0) {
    throw Error(
        fmt::format("conv2d '{}': a {}x{} kernel does not fit a {}x{} image with VALID "
                    "padding",
                    o.weight_name, o.kernel_height, o.kernel_width, o.height, o.width));
  }
  shape_ = {.height = o.height,
            .width = o.width,
            .in_channels = o.in_channels,
            .out_channels = o.out_channels,
            .kernel_height = o.kernel_height,
            .kernel_width = o.kernel_width,
            .stride_height = o.stride_height,
            .stride_width = o.stride_width,
            .pad_top = rows_.pad_before,
            .pad_left = cols_.pad_before,
            .out_height = rows_.out,
            .out_width = cols_.out,
            .bias = has_bias()};
  kernels_ = make_conv_kernels(shape_, o.implementation, o.weight_name);
}

std::string Conv2D::describe() const {
  const Conv2DOptions& o = options_;
  return fmt::format("conv2d {}x{}x{}->{}x{}x{} k{}x{} s{}x{} {} ({}, {})", o.height, o.width,
                     o.in_channels, rows_.out, cols_.out, o.out_channels, o.kernel_height,
                     o.kernel_width, o.stride_height, o.stride_width,
                     o.padding == Padding::kSame ? "same" : "valid", o.weight_name, o.bias_name);
}

Shape Conv2D::input_shape() const {
  return {options_.height, options_.width, options_.in_channels};
}

Shape Conv2D::output_shape() const { return {rows_.out, cols_.out, options_.out_channels}; }

std::vector<ParamSpec> Conv2D::param_specs() const {
  const Conv2DOptions& o = options_;
  const int64_t receptive = int64_t{o.kernel_height} * o.kernel_width;
  std::vector<ParamSpec> specs = {
      {.name = o.weight_name,
       .shape = {o.kernel_height, o.kernel_width, o.in_channels, o.out_channels},
       .init = o.weight_init,
       .l2 = o.weight_l2,
       .fan_in = receptive * o.in_channels,
       .fan_out = receptive * o.out_channels}};
  if (has_bias()) {
    specs.push_back({.name = o.bias_name,
                     .shape = {o.out_channels},
                     .init = o.bias_init,
                     .fan_in = o.out_channels,
                     .fan_out = o.out_channels});
  }
  return specs;
}

void Conv2D::forward(const ParamSet& params, const LayerIo& io) const {
  const float* bias = has_bias() ? params.values(first_param_ + 1).data() : nullptr;
  kernels_->forward(params.values(first_param_).data(), bias, io.in, io.batch, io.out);
}

void Conv2D::backward(const ParamSet& params, GradSet& grads, const LayerIo& io, const float* dout,
                      float* din) const {
  const float beta = start_weight_gradient(params, grads, first_param_);  // the L2 term
  float* db = has_bias() ? grads.values(first_param_ + 1).data() : nullptr;
  kernels_->backward(params.values(first_param_).data(), io.in, dout, io.batch, beta,
                     grads.values(first_param_).data(), db, din);
}

}  // namespace dtrain
