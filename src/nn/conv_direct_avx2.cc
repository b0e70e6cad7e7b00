// The direct convolution's kernels for AVX2 (built with its -m flags by CMakeLists.txt; run only
// where the CPU has it). The kernels themselves are in conv_direct_kernels.h.
namespace dtrain::direct_conv_kernels_avx2 {
constexpr const char* kName = "AVX2";
constexpr int kVectorBytes = 32;
// Vector registers of outputs: with a strip's weight vectors and the broadcast input beside them,
// they fit in the 16 ymm registers.
constexpr int kAccumulators = 10;
}  // namespace dtrain::direct_conv_kernels_avx2

#define DTRAIN_DIRECT_CONV_NAMESPACE direct_conv_kernels_avx2
#include "nn/conv_direct_kernels.h"

namespace dtrain {

const DirectConvIsa& direct_conv_avx2() { return direct_conv_kernels_avx2::kIsa; }

}  // namespace dtrain
