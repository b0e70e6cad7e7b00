// The direct convolution's kernels, written once for every instruction set: each of
// conv_direct_{avx512,avx2,baseline}.cc defines DTRAIN_DIRECT_CONV_NAMESPACE and, in it, kName,
// kVectorBytes and kAccumulators, then includes this file, which defines kIsa there; its compile
// flags pick the instructions.
//
// Only internal-linkage code in here: an inline function shared with other translation units
// (std::min, say) could be emitted here with AVX-512 instructions and then be the copy the linker
// keeps for every caller, including those on CPUs without them.
//
// Letters: C = C_in, O = C_out, OH×OW output, KH×KW kernel, SH×SW strides. taps = KW·C, the floats
// one kernel row covers: they are contiguous in a padded input row (NHWC) from any output column's
// window start, and w is (KH, taps, O). The kernels hold a block of outputs in registers
// (accumulators) and stream the taps: each weight vector is loaded once per strip and each input
// float is broadcast once per pair of 16-channel blocks.

#include <cstring>
#include <utility>

#include "nn/conv_direct_isa.h"

namespace dtrain::DTRAIN_DIRECT_CONV_NAMESPACE {
namespace {

constexpr int kLanes = kVectorBytes / static_cast<int>(sizeof(float));
typedef float Vec __attribute__((vector_size(kVectorBytes)));

// Output channels go 32 at a time (two 16-channel blocks share each broadcast input), the last 16
// alone when C_out is an odd multiple of 16.
constexpr int kPairVectors = 32 / kLanes;
constexpr int kSingleVectors = 16 / kLanes;

inline Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void store(float* p, Vec v) { std::memcpy(p, &v, sizeof v); }

inline int ceil_div(int a, int b) { return (a + b - 1) / b; }

// n in the fewest parts of at most `most`, as even as possible: the size of a part.
inline int even_part(int n, int most) { return ceil_div(n, ceil_div(n, most)); }

// The most outputs (columns, or taps) held at once with V vectors each.
template <int V>
constexpr int kMaxBlock = kAccumulators / V > 0 ? kAccumulators / V : 1;

struct Geometry {
  int taps;        // KW·C
  int o;           // C_out
  int row_floats;  // floats of one padded row
  int step;        // floats between the windows of neighbouring output columns: SW·C
};

inline Geometry geometry(const DirectConvImage& a) {
  const ConvShape& s = *a.shape;
  return {s.kernel_width * s.in_channels, s.out_channels, a.padded_width * s.in_channels,
          s.stride_width * s.in_channels};
}

// Output channels [c0, c0 + V·kLanes) of every output, RB columns at a time. The last strip may
// run past OW: those columns read padding and are not stored.
template <int V, int RB>
void forward_strips(const DirectConvImage& a, int c0) {
  const ConvShape& s = *a.shape;
  const Geometry g = geometry(a);
  for (int oh = 0; oh < s.out_height; ++oh) {
    for (int ow0 = 0; ow0 < s.out_width; ow0 += RB) {
      Vec acc[RB][V];
      for (int v = 0; v < V; ++v) {
        const Vec b = a.bias != nullptr ? load(a.bias + c0 + v * kLanes) : Vec{};
        for (int r = 0; r < RB; ++r) acc[r][v] = b;
      }
      for (int kh = 0; kh < s.kernel_height; ++kh) {
        const float* row = a.padded +
                           static_cast<size_t>(oh * s.stride_height + kh) * g.row_floats +
                           static_cast<size_t>(ow0) * g.step;
        const float* wk = a.w + static_cast<size_t>(kh) * g.taps * g.o + c0;
        for (int j = 0; j < g.taps; ++j) {
          Vec wv[V];
          for (int v = 0; v < V; ++v) wv[v] = load(wk + static_cast<size_t>(j) * g.o + v * kLanes);
#pragma GCC unroll 32
          for (int r = 0; r < RB; ++r) {
            const float x = row[r * g.step + j];
            for (int v = 0; v < V; ++v) acc[r][v] += wv[v] * x;
          }
        }
      }
      const int valid = s.out_width - ow0 < RB ? s.out_width - ow0 : RB;
      float* dst = a.out + (static_cast<size_t>(oh) * s.out_width + ow0) * g.o + c0;
      for (int r = 0; r < valid; ++r) {
        for (int v = 0; v < V; ++v)
          store(dst + static_cast<size_t>(r) * g.o + v * kLanes, acc[r][v]);
      }
    }
  }
}

// dw rows [j0, j0 + T) of kernel row kh, channels [c0, c0 + V·kLanes): a sum over every output of
// dout times the input that tap saw. Taps past the row's end read the next floats (the padding or
// kDirectConvSlack) and are not stored.
template <int V, int T>
void weight_gradient_taps(const DirectConvImage& a, int c0, int kh, int j0) {
  const ConvShape& s = *a.shape;
  const Geometry g = geometry(a);
  Vec acc[T][V] = {};
  for (int oh = 0; oh < s.out_height; ++oh) {
    const float* row =
        a.padded + static_cast<size_t>(oh * s.stride_height + kh) * g.row_floats + j0;
    const float* d = a.dout + static_cast<size_t>(oh) * s.out_width * g.o + c0;
    for (int ow = 0; ow < s.out_width; ++ow) {
      Vec dv[V];
      for (int v = 0; v < V; ++v) dv[v] = load(d + static_cast<size_t>(ow) * g.o + v * kLanes);
      const float* x = row + static_cast<size_t>(ow) * g.step;
#pragma GCC unroll 32
      for (int t = 0; t < T; ++t) {
        for (int v = 0; v < V; ++v) acc[t][v] += dv[v] * x[t];
      }
    }
  }
  const int valid = g.taps - j0 < T ? g.taps - j0 : T;
  for (int t = 0; t < valid; ++t) {
    float* dst = a.dw + (static_cast<size_t>(kh) * g.taps + j0 + t) * g.o + c0;
    for (int v = 0; v < V; ++v) store(dst + v * kLanes, load(dst + v * kLanes) + acc[t][v]);
  }
}

using ForwardKernel = void (*)(const DirectConvImage&, int);
using WeightKernel = void (*)(const DirectConvImage&, int, int, int);

// The kernel instantiated for block size n in [1, kMaxBlock<V>]: accumulators must be a
// compile-time array for the compiler to keep them in registers.
template <int V, int... I>
ForwardKernel forward_kernel(int n, std::integer_sequence<int, I...>) {
  const ForwardKernel kernels[] = {&forward_strips<V, I + 1>...};
  return kernels[n - 1];
}

template <int V, int... I>
WeightKernel weight_kernel(int n, std::integer_sequence<int, I...>) {
  const WeightKernel kernels[] = {&weight_gradient_taps<V, I + 1>...};
  return kernels[n - 1];
}

template <int V>
using Blocks = std::make_integer_sequence<int, kMaxBlock<V>>;

template <int V>
void forward_channels(const DirectConvImage& a, int c0) {
  forward_kernel<V>(even_part(a.shape->out_width, kMaxBlock<V>), Blocks<V>{})(a, c0);
}

template <int V>
void weight_gradient_channels(const DirectConvImage& a, int c0) {
  const int taps = a.shape->kernel_width * a.shape->in_channels;
  const int t = even_part(taps, kMaxBlock<V>);
  const WeightKernel kernel = weight_kernel<V>(t, Blocks<V>{});
  for (int kh = 0; kh < a.shape->kernel_height; ++kh) {
    for (int j0 = 0; j0 < taps; j0 += t) kernel(a, c0, kh, j0);
  }
}

// Calls pair(c0) for each 32 output channels and single(c0) for a last 16.
template <typename Pair, typename Single>
void over_channels(int out_channels, Pair pair, Single single) {
  int c0 = 0;
  for (; c0 + 32 <= out_channels; c0 += 32) pair(c0);
  if (c0 < out_channels) single(c0);
}

int covered_columns(int out_width) {
  const int pair = even_part(out_width, kMaxBlock<kPairVectors>);
  const int single = even_part(out_width, kMaxBlock<kSingleVectors>);
  const int a = ceil_div(out_width, pair) * pair, b = ceil_div(out_width, single) * single;
  return a > b ? a : b;
}

void forward(const DirectConvImage& a) {
  over_channels(
      a.shape->out_channels, [&](int c0) { forward_channels<kPairVectors>(a, c0); },
      [&](int c0) { forward_channels<kSingleVectors>(a, c0); });
}

void bias_gradient(const DirectConvImage& a) {
  const ConvShape& s = *a.shape;
  const int pixels = s.out_height * s.out_width, o = s.out_channels;
  for (int c0 = 0; c0 < o; c0 += kLanes) {
    Vec sum = {};
    for (int p = 0; p < pixels; ++p) sum += load(a.dout + static_cast<size_t>(p) * o + c0);
    store(a.db + c0, load(a.db + c0) + sum);
  }
}

void weight_gradient(const DirectConvImage& a) {
  over_channels(
      a.shape->out_channels, [&](int c0) { weight_gradient_channels<kPairVectors>(a, c0); },
      [&](int c0) { weight_gradient_channels<kSingleVectors>(a, c0); });
  if (a.db != nullptr) bias_gradient(a);
}

}  // namespace

constexpr DirectConvIsa kIsa = {.name = kName,
                                .covered_columns = &covered_columns,
                                .forward = &forward,
                                .weight_gradient = &weight_gradient};

}  // namespace dtrain::DTRAIN_DIRECT_CONV_NAMESPACE
