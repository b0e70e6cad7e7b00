// Convolution as im2col + GEMM (OpenBLAS): each output pixel's KH×KW×C_in input patch becomes a row
// of a matrix, which one product with the (KH·KW·C_in, C_out) weights turns into the outputs. Each
// thread does this for a few of its images at a time, so the patch rows it builds are still in its
// cache when the product reads them; backward builds them again rather than keeping the whole
// batch's (a whole batch of lenet's conv2 is 63 MB, 630 MB at an evaluation batch of 1000).
#pragma once

#include "nn/conv_kernels.h"

namespace dtrain {

class Im2colConv final : public ConvKernels {
 public:
  explicit Im2colConv(const ConvShape& shape);
  std::string name() const override { return "im2col + OpenBLAS"; }
  void forward(const float* w, const float* bias, const float* in, int batch,
               float* out) const override;
  void backward(const float* w, const float* in, const float* dout, int batch, float beta,
                float* dw, float* db, float* din) const override;
  // din = the input gradient alone (backward's din), for DirectConv.
  void input_gradient(const float* w, const float* dout, int batch, float* din) const;

 private:
  int patch_size() const;  // KH·KW·C_in: one row of the patch matrix
  int out_pixels() const { return s_.out_height * s_.out_width; }
  void im2col(const float* in, int images, float* cols) const;
  void col2im_add(const float* cols, int images, float* din) const;
  // din = col2im(dout·wᵀ) for `images` images, by way of dcols; din is added to.
  void input_gradient_chunk(const float* w, const float* dout, int images, float* dcols,
                            float* din) const;

  ConvShape s_;
  int chunk_images_;  // images whose patch rows a thread builds at once
};

}  // namespace dtrain
