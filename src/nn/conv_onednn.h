// Convolution by oneDNN (Debian's libdnnl, the library PyTorch's CPU convolutions call): JIT
// kernels for AVX2 / AVX-512 that convolve directly, without building patch rows. Each thread of
// the team runs the primitives on its own images, with oneDNN's OpenMP parallelism held to that one
// thread, so oneDNN never starts threads that would fight the team's for the cores.
//
// The layer's tensors stay in dtrain's layouts (NHWC activations, (KH, KW, C_in, C_out) weights):
// oneDNN reads and writes the activations in place and gets the weights in its blocked layout
// through a reorder per call (51 K floats for lenet's conv2, a few microseconds).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "nn/conv_kernels.h"
#include "tensor/blas.h"

namespace dtrain {

class OneDnnConv final : public ConvKernels {
 public:
  // nullptr, with the reason in *why_not, when oneDNN cannot run the shape, or, unless `forced`,
  // when it has no vectorised kernel for it or one slower than im2col (see the .cc).
  static std::unique_ptr<OneDnnConv> create(const ConvShape& shape, bool forced,
                                            std::string* why_not);
  ~OneDnnConv() override;

  std::string name() const override { return "oneDNN " + implementation_; }
  // The forward pass's kernel alone, e.g. "oneDNN brgconv:avx512_core".
  std::string forward_name() const { return "oneDNN " + forward_implementation_; }
  // Whether oneDNN's backward passes are measured faster than im2col's for the shape (see the
  // .cc); where they are not, auto runs oneDNN's forward and im2col's backward.
  static bool backward_beats_im2col(const ConvShape& shape);
  void forward(const float* w, const float* bias, const float* in, int batch,
               float* out) const override;
  void backward(const float* w, const float* in, const float* dout, int batch, float beta,
                float* dw, float* db, float* din) const override;

 private:
  struct Primitives;  // for one number of images
  explicit OneDnnConv(const ConvShape& shape);
  // The primitives for `images` images at once, made on first use. Thread-safe: towers share it.
  const Primitives& primitives(int images, Precision precision) const;
  // Each part's primitives (nullptr for a part without images).
  std::vector<const Primitives*> primitives_per_part(int batch, Precision precision) const;

  ConvShape s_;
  std::string implementation_;
  std::string forward_implementation_;
  mutable std::mutex mutex_;
  mutable std::map<std::pair<int, Precision>, std::unique_ptr<Primitives>> by_images_;
};

}  // namespace dtrain
