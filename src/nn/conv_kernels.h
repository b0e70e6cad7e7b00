// The arithmetic behind Conv2D, behind one seam so the layer can run whichever implementation is
// fastest for its shape: oneDNN's JIT convolutions (conv_onednn.h) where oneDNN has a vectorised
// kernel for the shape (below 32 input channels its forward pass only, with im2col's backward);
// dtrain's direct kernels (conv_direct.h) for few input channels, e.g. a first layer with one, for
// which oneDNN 2.6 offers only its reference loops; im2col + OpenBLAS GEMM (conv_im2col.h) for the
// rest.
//
// All three divide a batch over the current ThreadTeam by images: each thread convolves its own
// images from start to end, so nothing between the layer's products is serial and each thread's
// working set stays in its own core's cache. The weight gradient is then one partial sum per
// thread, added in thread order, so a given team size gives the same gradient bit for bit.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dtrain {

// One convolution's geometry. Activations are NHWC, weights (KH, KW, C_in, C_out) as in Conv2D.
struct ConvShape {
  int height = 0;
  int width = 0;
  int in_channels = 0;
  int out_channels = 0;
  int kernel_height = 0;
  int kernel_width = 0;
  int stride_height = 1;
  int stride_width = 1;
  int pad_top = 0;   // rows of zeros before the image
  int pad_left = 0;  // columns of zeros before the image
  int out_height = 0;
  int out_width = 0;
  bool bias = true;

  size_t image_floats() const { return static_cast<size_t>(height) * width * in_channels; }
  size_t out_image_floats() const {
    return static_cast<size_t>(out_height) * out_width * out_channels;
  }
  size_t weight_floats() const {
    return static_cast<size_t>(kernel_height) * kernel_width * in_channels * out_channels;
  }
  // Zeros after the image: whatever the last window reaches beyond it.
  int pad_bottom() const {
    return (out_height - 1) * stride_height + kernel_height - height - pad_top;
  }
  int pad_right() const { return (out_width - 1) * stride_width + kernel_width - width - pad_left; }
};

class ConvKernels {
 public:
  virtual ~ConvKernels() = default;
  // What runs, for the configuration line, e.g. "oneDNN brgconv:avx512_core".
  virtual std::string name() const = 0;
  // out = in ⋆ w + bias for `batch` images; bias may be null.
  virtual void forward(const float* w, const float* bias, const float* in, int batch,
                       float* out) const = 0;
  // dw = beta·dw + the weight gradient; db (when not null) = the bias gradient; din (when not
  // null) = the input gradient, written, not accumulated.
  virtual void backward(const float* w, const float* in, const float* dout, int batch, float beta,
                        float* dw, float* db, float* din) const = 0;
};

// Which implementation Conv2D runs: kAuto takes oneDNN where it has a vectorised kernel for the
// shape that is faster than im2col (for the forward pass alone where im2col's backward is
// faster), the direct kernels where they run the shape, and im2col otherwise; the others force one,
// whatever its speed (tests and `dtrain bench train` compare them).
enum class ConvImplementation { kAuto, kOneDnn, kDirect, kIm2col };
std::string_view conv_implementation_name(ConvImplementation implementation);
// Throws std::invalid_argument naming the value and the choices.
ConvImplementation parse_conv_implementation(std::string_view name);

// Throws Error naming `layer` when kOneDnn or kDirect is forced on a shape it cannot run at all.
std::unique_ptr<ConvKernels> make_conv_kernels(const ConvShape& shape,
                                               ConvImplementation implementation,
                                               std::string_view layer);

// The helpers the implementations share.
namespace conv_detail {

// [begin, end) of the images part p of `parts` convolves: the whole batch split evenly.
struct ImageRange {
  int begin;
  int end;
};
ImageRange image_range(int batch, int parts, int p);

// A float buffer of this thread for one purpose, grown to at least `floats` and 64-byte aligned.
// A thread runs one layer at a time, so layers share a thread's buffers; a thread of each tower's
// team has its own.
enum class ThreadBuffer {
  kColumns,
  kColumnGradient,
  kWeights,
  kWeightGradient,
  kBiasGradient,
  kScratchpad,
  kSourceBf16,    // bf16 precision: the images (forward, weight gradient) as bf16
  kGradientBf16,  // and the gradient of the output
  kCount
};
float* thread_buffer(ThreadBuffer which, size_t floats);

// dst = beta·dst + Σ_p parts[p] (n floats each), summed in part order.
void sum_partials(const std::vector<const float*>& parts, size_t n, float beta, float* dst);

}  // namespace conv_detail

}  // namespace dtrain
