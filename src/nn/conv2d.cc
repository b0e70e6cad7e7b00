// Conv2D forward/backward by im2col + GEMM. N = batch, H×W = input (and output) size, C = C_in,
// O = C_out, K = kernel, P = K·K·C (one im2col row). in is (N,H,W,C), w is (K,K,C,O) which is
// already the (P, O) matrix the GEMM wants, cols is (N·H·W, P), out is (N·H·W, O).
#include "nn/conv2d.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/error.h"
#include "tensor/blas.h"

namespace dtrain {
namespace {

// Images whose input-gradient columns backward materialises at once. The full batch would double
// the scratch (63 MB more at lenet's conv2, batch 100) and was measured 20% slower: at 4 images the
// GEMM already has 784 rows, and the chunk's columns (2.5 MB) are still warm when col2im reads
// them.
constexpr int kBackwardChunkImages = 4;

// The valid kernel columns [lo, hi) for output column ow: those whose input column ow + kw - pad
// lies inside [0, W). hi > lo always, since pad < K and W > 0.
struct KernelColumns {
  int lo;
  int hi;
};
KernelColumns valid_kernel_columns(int ow, int width, int kernel, int pad) {
  return {std::max(0, pad - ow), std::min(kernel, width + pad - ow)};
}

}  // namespace

Conv2D::Conv2D(Conv2DOptions options) : options_(std::move(options)) {
  const Conv2DOptions& o = options_;
  if (o.height <= 0 || o.width <= 0 || o.in_channels <= 0 || o.out_channels <= 0 || o.kernel <= 0) {
    throw Error(
        fmt::format("conv2d '{}': sizes must be positive (height {}, width {}, in_channels {}, "
                    "out_channels {}, kernel {})",
                    o.weight_name, o.height, o.width, o.in_channels, o.out_channels, o.kernel));
  }
  if (o.stride != 1) {
    throw Error(fmt::format("conv2d '{}': stride {} is not supported; only stride 1 (SAME padding)",
                            o.weight_name, o.stride));
  }
  // TensorFlow's SAME: total padding K-1, the smaller half before.
  pad_ = (o.kernel - 1) / 2;
}

std::string Conv2D::describe() const {
  const Conv2DOptions& o = options_;
  return fmt::format("conv2d {}x{}x{}->{} k{} same ({}, {})", o.height, o.width, o.in_channels,
                     o.out_channels, o.kernel, o.weight_name, o.bias_name);
}

Shape Conv2D::input_shape() const {
  return {options_.height, options_.width, options_.in_channels};
}

Shape Conv2D::output_shape() const {
  return {options_.height, options_.width, options_.out_channels};
}

std::vector<ParamSpec> Conv2D::param_specs() const {
  const Conv2DOptions& o = options_;
  ParamSpec w{o.weight_name,
              {o.kernel, o.kernel, o.in_channels, o.out_channels},
              o.weight_stddev > 0 ? InitKind::kTruncatedNormal : InitKind::kZeros,
              o.weight_stddev,
              true};
  ParamSpec b{o.bias_name, {o.out_channels}, InitKind::kConstant, o.bias_init, false};
  return {w, b};
}

int Conv2D::patch_size() const { return options_.kernel * options_.kernel * options_.in_channels; }

size_t Conv2D::scratch_floats(int batch) const {
  const size_t pixels = static_cast<size_t>(options_.height) * options_.width;
  const size_t chunk = static_cast<size_t>(std::min(batch, kBackwardChunkImages));
  return (static_cast<size_t>(batch) + chunk) * pixels * patch_size();
}

// Row (n, oh, ow) of cols holds the K×K×C input patch centred on (oh, ow), in w's (kh, kw, c)
// order. For one kernel row kh the valid kernel columns map to consecutive input columns, and NHWC
// keeps their channels adjacent, so each kernel row is one contiguous copy plus zeroed padding on
// either side; rows of kernel that fall above or below the image are zero.
void Conv2D::im2col(const float* in, int batch, float* cols) const {
  const int h = options_.height, w = options_.width, c = options_.in_channels, k = options_.kernel;
  const size_t row_floats = static_cast<size_t>(k) * c;
  float* dst = cols;
  for (int n = 0; n < batch; ++n) {
    const float* image = in + static_cast<size_t>(n) * h * w * c;
    for (int oh = 0; oh < h; ++oh) {
      for (int ow = 0; ow < w; ++ow) {
        const KernelColumns kc = valid_kernel_columns(ow, w, k, pad_);
        for (int kh = 0; kh < k; ++kh, dst += row_floats) {
          const int ih = oh + kh - pad_;
          if (ih < 0 || ih >= h) {
            std::fill_n(dst, row_floats, 0.0f);
            continue;
          }
          const float* src = image + (static_cast<size_t>(ih) * w + (ow + kc.lo - pad_)) * c;
          std::fill_n(dst, static_cast<size_t>(kc.lo) * c, 0.0f);
          std::copy_n(src, static_cast<size_t>(kc.hi - kc.lo) * c, dst + kc.lo * c);
          std::fill_n(dst + kc.hi * c, static_cast<size_t>(k - kc.hi) * c, 0.0f);
        }
      }
    }
  }
}

// The adjoint of im2col: every column entry is added back to the input element it was copied from;
// entries that were padding are dropped.
void Conv2D::col2im_add(const float* cols, int batch, float* din) const {
  const int h = options_.height, w = options_.width, c = options_.in_channels, k = options_.kernel;
  const size_t row_floats = static_cast<size_t>(k) * c;
  const float* src = cols;
  for (int n = 0; n < batch; ++n) {
    float* image = din + static_cast<size_t>(n) * h * w * c;
    for (int oh = 0; oh < h; ++oh) {
      for (int ow = 0; ow < w; ++ow) {
        const KernelColumns kc = valid_kernel_columns(ow, w, k, pad_);
        for (int kh = 0; kh < k; ++kh, src += row_floats) {
          const int ih = oh + kh - pad_;
          if (ih < 0 || ih >= h) continue;
          float* dst = image + (static_cast<size_t>(ih) * w + (ow + kc.lo - pad_)) * c;
          const float* run = src + kc.lo * c;
          const int run_floats = (kc.hi - kc.lo) * c;
          for (int i = 0; i < run_floats; ++i) dst[i] += run[i];
        }
      }
    }
  }
}

void Conv2D::forward(const ParamSet& params, const LayerIo& io) const {
  const int rows = io.batch * options_.height * options_.width;
  const int p = patch_size(), o = options_.out_channels;
  const float* w = params.values(first_param_).data();
  const float* b = params.values(first_param_ + 1).data();
  float* cols = io.scratch;
  im2col(io.in, io.batch, cols);
  // Broadcast the bias into out, then let the GEMM accumulate on top of it (beta = 1).
  for (int r = 0; r < rows; ++r) std::copy_n(b, o, io.out + static_cast<size_t>(r) * o);
  gemm(Trans::kNo, Trans::kNo, rows, o, p, 1.0f, cols, p, w, o, 1.0f, io.out, o);
}

void Conv2D::backward(const ParamSet& params, GradSet& grads, const LayerIo& io, const float* dout,
                      float* din) const {
  // Forward was out = cols·w + b with cols = im2col(in), so dw = colsᵀ·dout, db = Σ_rows dout,
  // dcols = dout·wᵀ and din = col2im(dcols), the adjoint of im2col.
  const int pixels = options_.height * options_.width;
  const int rows = io.batch * pixels;
  const int p = patch_size(), o = options_.out_channels;
  const float* cols = io.scratch;
  float* dw = grads.values(first_param_).data();
  float* db = grads.values(first_param_ + 1).data();
  const float beta = start_weight_gradient(params, grads, first_param_);  // the L2 term
  gemm(Trans::kYes, Trans::kNo, p, o, rows, 1.0f, cols, p, dout, o, beta, dw, o);
  std::fill_n(db, o, 0.0f);
  for (int r = 0; r < rows; ++r) {
    const float* row = dout + static_cast<size_t>(r) * o;
    for (int j = 0; j < o; ++j) db[j] += row[j];
  }
  if (din == nullptr) return;

  const float* w = params.values(first_param_).data();
  const size_t image_floats = static_cast<size_t>(pixels) * options_.in_channels;
  float* dcols = io.scratch + static_cast<size_t>(rows) * p;
  std::fill_n(din, io.batch * image_floats, 0.0f);
  for (int first = 0; first < io.batch; first += kBackwardChunkImages) {
    const int images = std::min(kBackwardChunkImages, io.batch - first);
    const float* dout_chunk = dout + static_cast<size_t>(first) * pixels * o;
    gemm(Trans::kNo, Trans::kYes, images * pixels, p, o, 1.0f, dout_chunk, o, w, o, 0.0f, dcols, p);
    col2im_add(dcols, images, din + first * image_floats);
  }
}

}  // namespace dtrain
