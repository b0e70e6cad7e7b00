// Direct convolution for layers with few input channels, such as a first layer on images with 1
// or 3: there oneDNN 2.6 has only its reference loops, and im2col's patch rows are KH·KW times the
// input for a GEMM with a short inner dimension. Each thread zero-pads one image at a time and
// reads every output's window straight from it, a strip of outputs held in vector registers
// (conv_direct_kernels.h), with kernels for the widest instruction set the CPU runs. The input
// gradient, which only a layer that is not the first needs, is im2col's: dout·wᵀ by GEMM, then
// added back into the windows.
#pragma once

#include "nn/conv_direct_isa.h"
#include "nn/conv_im2col.h"
#include "nn/conv_kernels.h"

namespace dtrain {

class DirectConv final : public ConvKernels {
 public:
  // Whether the kernels run `shape`; if not, the reason in *why_not.
  static bool supports(const ConvShape& shape, std::string* why_not);
  // REQUIRES: supports(shape), and `isa` is one of direct_conv_isas_here().
  DirectConv(const ConvShape& shape, const DirectConvIsa& isa);

  std::string name() const override { return std::string("direct ") + isa_.name; }
  void forward(const float* w, const float* bias, const float* in, int batch,
               float* out) const override;
  void backward(const float* w, const float* in, const float* dout, int batch, float beta,
                float* dw, float* db, float* din) const override;

 private:
  size_t padded_floats() const;
  // The image inside zeros, as the kernels read it.
  void pad(const float* image, float* padded) const;

  ConvShape s_;
  const DirectConvIsa& isa_;
  Im2colConv im2col_;
  int padded_height_;
  int padded_width_;
};

}  // namespace dtrain
