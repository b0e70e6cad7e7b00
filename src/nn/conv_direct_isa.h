// The direct convolution's inner kernels (conv_direct.h), compiled once per instruction set:
// conv_direct_kernels.h is included by conv_direct_{avx512,avx2,baseline}.cc, each built with its
// own -m flags, and the layer picks the widest the CPU runs. The rest of the binary stays
// baseline x86-64.
#pragma once

#include <span>

#include "nn/conv_kernels.h"

namespace dtrain {

// One image's operands. `padded` is the image with its zero padding around it:
// padded_height × padded_width pixels of C_in floats, followed by at least kDirectConvSlack zeros,
// and wide enough for whole strips of output columns (DirectConv sizes it).
struct DirectConvImage {
  const ConvShape* shape = nullptr;
  int padded_height = 0;
  int padded_width = 0;
  const float* padded = nullptr;
  const float* w = nullptr;     // (KH, KW, C_in, C_out)
  const float* bias = nullptr;  // forward: C_out, or null
  float* out = nullptr;         // forward: OH × OW × C_out
  const float* dout = nullptr;  // backward: OH × OW × C_out
  float* dw = nullptr;          // backward: added to
  float* db = nullptr;          // backward: added to, or null
};

// Floats a kernel may read past the last padded row (and ignore).
constexpr int kDirectConvSlack = 64;

// The kernels for one instruction set. Each needs C_out to be a multiple of 16.
struct DirectConvIsa {
  const char* name;  // "AVX-512", for the configuration line
  // The output columns forward's strips cover (at least out_width): padded_width must reach the
  // windows of all of them.
  int (*covered_columns)(int out_width);
  void (*forward)(const DirectConvImage& image);
  void (*weight_gradient)(const DirectConvImage& image);  // dw (and db) += this image's
};

const DirectConvIsa& direct_conv_avx512();
const DirectConvIsa& direct_conv_avx2();
const DirectConvIsa& direct_conv_baseline();

// Every instruction set this CPU runs, widest first (conv_direct.cc, itself baseline code).
std::span<const DirectConvIsa* const> direct_conv_isas_here();

}  // namespace dtrain
