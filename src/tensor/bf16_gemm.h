// Matrix products with bf16 inputs: A and B rounded to bfloat16 (to nearest, ties to even), their
// products summed and written in fp32, through oneDNN's matmul primitive (AMX tiles where the CPU
// has AMX-BF16, AVX512-BF16 instructions otherwise). gemm() calls it under Precision::kBf16.
#pragma once

#include <string>

#include "tensor/blas.h"

namespace dtrain {

// C (m x n) = alpha * op(A) * op(B) + beta * C as gemm() defines it, with A and B taken as bf16,
// on the calling thread alone. Primitives are made on first use of a shape and kept per thread.
void bf16_gemm(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha, const float* a,
               int lda, const float* b, int ldb, float beta, float* c, int ldc);

// Whether a product of this shape is faster on bf16 kernels than on fp32 ones, as oneDNN 2.6's
// bf16 matmul measured on AMX (docs/benchmarks.md): not a product shallower than one AMX tile
// (k < 32) or with fewer rows than one (m < 16), where converting the operands costs more than
// the kernel saves. By the whole product's shape, so that a product's arithmetic does not depend
// on how many threads split it. gemm() under Precision::kBf16 computes the others in fp32.
bool bf16_gemm_pays(int m, int n, int k);

// Empty when bf16 products run here; else why not, naming what the CPU lacks ("this CPU has
// neither AVX512-BF16 nor AMX-BF16 (oneDNN's kernels: avx2)"), or that ONEDNN_MAX_CPU_ISA holds
// oneDNN below them.
std::string bf16_unsupported_reason();

// The kernel oneDNN runs a bf16 product of this shape with, e.g. "brg:avx512_core_amx_bf16".
std::string bf16_gemm_implementation(int m, int n, int k);

}  // namespace dtrain
