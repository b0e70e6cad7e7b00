// ReLU, tanh, sigmoid, Flatten and Reshape.
#include "nn/activation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "tensor/thread_team.h"

namespace dtrain {

std::string Relu::describe() const { return fmt::format("relu {}", shape_string(shape_)); }

void Relu::forward(const ParamSet&, const LayerIo& io) const {
  const size_t n = static_cast<size_t>(io.batch * num_elements(shape_));
  parallel_ranges(n, 16, [&](int, size_t begin, size_t end) {
    const float* __restrict in = io.in;
    float* __restrict out = io.out;
    for (size_t i = begin; i < end; ++i) out[i] = in[i] > 0.0f ? in[i] : 0.0f;
  });
}

void Relu::backward(const ParamSet&, GradSet&, const LayerIo& io, const float* dout,
                    float* din) const {
  if (din == nullptr) return;
  const size_t n = static_cast<size_t>(io.batch * num_elements(shape_));
  // Written as a select over restrict pointers so it vectorises: as a branch on the sign of a
  // roughly half-positive activation it mispredicts every other element and costs more than the
  // layer's GEMMs. The subgradient at 0 is taken as 0, as TensorFlow does.
  parallel_ranges(n, 16, [&](int, size_t begin, size_t end) {
    const float* __restrict out = io.out;
    const float* __restrict g = dout;
    float* __restrict d = din;
    for (size_t i = begin; i < end; ++i) {
      const float gi = g[i];  // loaded unconditionally, which is what lets the compiler select
      d[i] = out[i] > 0.0f ? gi : 0.0f;
    }
  });
}

std::string Tanh::describe() const { return fmt::format("tanh {}", shape_string(shape_)); }

void Tanh::forward(const ParamSet&, const LayerIo& io) const {
  const int64_t n = io.batch * num_elements(shape_);
  for (int64_t i = 0; i < n; ++i) io.out[i] = std::tanh(io.in[i]);
}

void Tanh::backward(const ParamSet&, GradSet&, const LayerIo& io, const float* dout,
                    float* din) const {
  // Forward was out = tanh(in), whose derivative is 1 - tanh² = 1 - out².
  if (din == nullptr) return;
  const int64_t n = io.batch * num_elements(shape_);
  for (int64_t i = 0; i < n; ++i) din[i] = dout[i] * (1.0f - io.out[i] * io.out[i]);
}

std::string Sigmoid::describe() const { return fmt::format("sigmoid {}", shape_string(shape_)); }

void Sigmoid::forward(const ParamSet&, const LayerIo& io) const {
  const int64_t n = io.batch * num_elements(shape_);
  for (int64_t i = 0; i < n; ++i) io.out[i] = 1.0f / (1.0f + std::exp(-io.in[i]));
}

void Sigmoid::backward(const ParamSet&, GradSet&, const LayerIo& io, const float* dout,
                       float* din) const {
  // Forward was out = σ(in), whose derivative is σ·(1 - σ) = out·(1 - out).
  if (din == nullptr) return;
  const int64_t n = io.batch * num_elements(shape_);
  for (int64_t i = 0; i < n; ++i) din[i] = dout[i] * io.out[i] * (1.0f - io.out[i]);
}

Reshape::Reshape(Shape input_shape, Shape output_shape)
    : in_(std::move(input_shape)), out_(std::move(output_shape)) {
  if (num_elements(in_) != num_elements(out_)) {
    throw Error(fmt::format("reshape {}->{}: the shapes hold {} and {} values", shape_string(in_),
                            shape_string(out_), num_elements(in_), num_elements(out_)));
  }
}

std::string Reshape::describe() const {
  return fmt::format("reshape {}->{}", shape_string(in_), shape_string(out_));
}

void Reshape::forward(const ParamSet&, const LayerIo& io) const {
  std::copy_n(io.in, io.batch * num_elements(in_), io.out);
}

void Reshape::backward(const ParamSet&, GradSet&, const LayerIo& io, const float* dout,
                       float* din) const {
  if (din != nullptr) std::copy_n(dout, io.batch * num_elements(in_), din);
}

std::string Flatten::describe() const {
  return fmt::format("flatten {}->[{}]", shape_string(shape_), num_elements(shape_));
}

void Flatten::forward(const ParamSet&, const LayerIo& io) const {
  std::copy_n(io.in, io.batch * num_elements(shape_), io.out);
}

void Flatten::backward(const ParamSet&, GradSet&, const LayerIo& io, const float* dout,
                       float* din) const {
  if (din != nullptr) std::copy_n(dout, io.batch * num_elements(shape_), din);
}

}  // namespace dtrain
