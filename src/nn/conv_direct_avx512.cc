// The direct convolution's kernels for AVX-512 (built with its -m flags by CMakeLists.txt; run only
// where the CPU has it). The kernels themselves are in conv_direct_kernels.h.
namespace dtrain::direct_conv_kernels_avx512 {
constexpr const char* kName = "AVX-512";
constexpr int kVectorBytes = 64;
// Vector registers of outputs: with a strip's weight vectors and the broadcast input beside them,
// they fit in the 32 zmm registers.
constexpr int kAccumulators = 24;
}  // namespace dtrain::direct_conv_kernels_avx512

#define DTRAIN_DIRECT_CONV_NAMESPACE direct_conv_kernels_avx512
#include "nn/conv_direct_kernels.h"

namespace dtrain {

const DirectConvIsa& direct_conv_avx512() { return direct_conv_kernels_avx512::kIsa; }

}  // namespace dtrain
