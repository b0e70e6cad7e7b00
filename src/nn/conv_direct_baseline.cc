// The direct convolution's kernels for SSE2, which every x86-64 CPU runs. The kernels themselves
// are in conv_direct_kernels.h.
namespace dtrain::direct_conv_kernels_baseline {
constexpr const char* kName = "SSE2";
constexpr int kVectorBytes = 16;
// Vector registers of outputs, of the 16 xmm registers. 32 output channels are 8 registers per
// output, so their strips are one output wide and spill a little: this is the fallback.
constexpr int kAccumulators = 8;
}  // namespace dtrain::direct_conv_kernels_baseline

#define DTRAIN_DIRECT_CONV_NAMESPACE direct_conv_kernels_baseline
#include "nn/conv_direct_kernels.h"

namespace dtrain {

const DirectConvIsa& direct_conv_baseline() { return direct_conv_kernels_baseline::kIsa; }

}  // namespace dtrain
