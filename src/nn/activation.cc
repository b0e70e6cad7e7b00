// ReLU and Flatten.
#include "nn/activation.h"

#include <fmt/format.h>

#include <algorithm>

namespace dtrain {

std::string Relu::describe() const { return fmt::format("relu {}", shape_string(shape_)); }

void Relu::forward(const ParamSet&, const LayerIo& io) const {
  const int64_t n = io.batch * num_elements(shape_);
  const float* __restrict in = io.in;
  float* __restrict out = io.out;
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] > 0.0f ? in[i] : 0.0f;
}

void Relu::backward(const ParamSet&, GradSet&, const LayerIo& io, const float* dout,
                    float* din) const {
  if (din == nullptr) return;
  const int64_t n = io.batch * num_elements(shape_);
  // Written as a select over restrict pointers so it vectorises: as a branch on the sign of a
  // roughly half-positive activation it mispredicts every other element and costs more than the
  // layer's GEMMs. The subgradient at 0 is taken as 0, as TensorFlow does.
  const float* __restrict out = io.out;
  const float* __restrict g = dout;
  float* __restrict d = din;
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i];  // loaded unconditionally, which is what lets the compiler select
    d[i] = out[i] > 0.0f ? gi : 0.0f;
  }
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
