#include "nn/conv_kernels.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "base/error.h"
#include "nn/conv_direct.h"
#include "nn/conv_im2col.h"
#include "nn/conv_onednn.h"
#include "tensor/aligned.h"

namespace dtrain {
namespace {

// One implementation's forward pass with another's backward passes, for shapes where the fastest
// differ. Each pass stays whole (the weight gradient and the input gradient come from one
// implementation), so a team size still gives the same gradient bit for bit.
class SplitConv final : public ConvKernels {
 public:
  SplitConv(std::unique_ptr<OneDnnConv> forward, std::unique_ptr<ConvKernels> backward)
      : forward_(std::move(forward)), backward_(std::move(backward)) {}
  std::string name() const override {
    return fmt::format("{} forward, {} backward", forward_->forward_name(), backward_->name());
  }
  void forward(const float* w, const float* bias, const float* in, int batch,
               float* out) const override {
    forward_->forward(w, bias, in, batch, out);
  }
  void backward(const float* w, const float* in, const float* dout, int batch, float beta,
                float* dw, float* db, float* din) const override {
    backward_->backward(w, in, dout, batch, beta, dw, db, din);
  }

 private:
  std::unique_ptr<OneDnnConv> forward_;
  std::unique_ptr<ConvKernels> backward_;
};

}  // namespace

std::string_view conv_implementation_name(ConvImplementation implementation) {
  switch (implementation) {
    case ConvImplementation::kAuto:
      return "auto";
    case ConvImplementation::kOneDnn:
      return "onednn";
    case ConvImplementation::kDirect:
      return "direct";
    case ConvImplementation::kIm2col:
      return "im2col";
  }
  return "?";
}

ConvImplementation parse_conv_implementation(std::string_view name) {
  for (const ConvImplementation c : {ConvImplementation::kAuto, ConvImplementation::kOneDnn,
                                     ConvImplementation::kDirect, ConvImplementation::kIm2col}) {
    if (name == conv_implementation_name(c)) return c;
  }
  throw std::invalid_argument(
      fmt::format("--conv_kernels {}: choose auto, onednn, direct or im2col", std::string(name)));
}

std::unique_ptr<ConvKernels> make_conv_kernels(const ConvShape& shape,
                                               ConvImplementation implementation,
                                               std::string_view layer) {
  std::string why_not;
  switch (implementation) {
    case ConvImplementation::kIm2col:
      return std::make_unique<Im2colConv>(shape);
    case ConvImplementation::kDirect:
      if (!DirectConv::supports(shape, &why_not)) {
        throw Error(fmt::format("conv2d '{}': --conv_kernels direct: {}", layer, why_not));
      }
      return std::make_unique<DirectConv>(shape, *direct_conv_isas_here().front());
    case ConvImplementation::kOneDnn:
      if (auto onednn = OneDnnConv::create(shape, /*forced=*/true, &why_not)) return onednn;
      throw Error(fmt::format("conv2d '{}': --conv_kernels onednn: {}", layer, why_not));
    case ConvImplementation::kAuto:
      break;
  }
  if (auto onednn = OneDnnConv::create(shape, /*forced=*/false, &why_not)) {
    if (OneDnnConv::backward_beats_im2col(shape)) return onednn;
    return std::make_unique<SplitConv>(std::move(onednn), std::make_unique<Im2colConv>(shape));
  }
  if (DirectConv::supports(shape, &why_not)) {
    return std::make_unique<DirectConv>(shape, *direct_conv_isas_here().front());
  }
  return std::make_unique<Im2colConv>(shape);
}

namespace conv_detail {

ImageRange image_range(int batch, int parts, int p) {
  auto boundary = [&](int q) { return static_cast<int>(static_cast<int64_t>(batch) * q / parts); };
  return {boundary(p), boundary(p + 1)};
}

float* thread_buffer(ThreadBuffer which, size_t floats) {
  thread_local std::array<FloatBuffer, static_cast<size_t>(ThreadBuffer::kCount)> buffers;
  FloatBuffer& buffer = buffers[static_cast<size_t>(which)];
  if (buffer.size() < floats) buffer.resize(floats);
  return buffer.data();
}

void sum_partials(const std::vector<const float*>& parts, size_t n, float beta, float* dst) {
  float* __restrict out = dst;
  for (size_t p = 0; p < parts.size(); ++p) {
    const float* __restrict part = parts[p];
    if (p == 0 && beta == 0.0f) {
      for (size_t i = 0; i < n; ++i) out[i] = part[i];
    } else if (p == 0) {
      for (size_t i = 0; i < n; ++i) out[i] = beta * out[i] + part[i];
    } else {
      for (size_t i = 0; i < n; ++i) out[i] += part[i];
    }
  }
  if (parts.empty()) {
    for (size_t i = 0; i < n; ++i) out[i] = beta == 0.0f ? 0.0f : beta * out[i];
  }
}

}  // namespace conv_detail

}  // namespace dtrain
