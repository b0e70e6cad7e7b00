// ReLU and Flatten.
#include "nn/activation.h"

#include <fmt/format.h>

#include <algorithm>

namespace dtrain {

std::string Relu::describe() const { return fmt::format("relu {}", shape_string(shape_)); }

void Relu::forward(const ParamSet&, const LayerIo& io) const {
  const int64_t n = io.batch * num_elements(shape_);
  for (int64_t i = 0; i < n; ++i) io.out[i] = io.in[i] > 0.0f ? io.in[i] : 0.0f;
}

void Relu::backward(const ParamSet&, GradSet&, const LayerIo& io, const float* dout,
                    float* din) const {
  if (din == nullptr) return;
  const int64_t n = io.batch * num_elements(shape_);
  // The subgradient at 0 is taken as 0, as TensorFlow does.
  for (int64_t i = 0; i < n; ++i) din[i] = io.out[i] > 0.0f ? dout[i] : 0.0f;
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
