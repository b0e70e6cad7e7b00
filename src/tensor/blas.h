// Matrix products through BLAS (OpenBLAS cblas_sgemm), row-major, and control of BLAS's own
// threads. Every matmul in dtrain goes through gemm() so the kernel choice and thread count live in
// one place.
#pragma once

#include <cstddef>
#include <string>

namespace dtrain {

enum class Trans { kNo, kYes };

// How a product is divided over the current ThreadTeam. The threads write disjoint blocks of C, and
// when a block of C (or of B) is the same memory step after step, it stays in one core's cache:
// a layer asks for the split that keeps each core on its own rows of the weights across the
// forward and backward products. kAuto splits by columns when C is wide enough, else by rows.
// kNone runs on the calling thread alone: for a caller that is itself one part of a team's split
// (a layer that divides its batch over the team), where splitting again would re-enter the team.
enum class Split { kAuto, kRows, kColumns, kNone };

// C (m x n) = alpha * op(A) (m x k) * op(B) (k x n) + beta * C, row-major with leading dimensions.
void gemm(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc, Split split = Split::kAuto);

// Threads BLAS may use for one call. dtrain owns this count: BLAS's pool and our own threads share
// the cores, and oversubscribing two cores halves throughput.
void blas_set_threads(int threads);
int blas_threads();
// The kernel set OpenBLAS runs (e.g. "Haswell" for AVX2, "SkylakeX" for AVX-512), as it chose it
// or OPENBLAS_CORETYPE forced it (tensor/blas_kernels.h says which and why).
std::string blas_kernel_name();

}  // namespace dtrain
