// Matrix products through BLAS (OpenBLAS cblas_sgemm), row-major, and control of BLAS's own
// threads. Every matmul in dtrain goes through gemm() so the kernel choice and thread count live in
// one place.
#pragma once

#include <string>

namespace dtrain {

enum class Trans { kNo, kYes };

// C (m x n) = alpha * op(A) (m x k) * op(B) (k x n) + beta * C, row-major with leading dimensions.
void gemm(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc);

// Threads BLAS may use for one call. dtrain owns this count: BLAS's pool and our own threads share
// the cores, and oversubscribing two cores halves throughput.
void blas_set_threads(int threads);
int blas_threads();
// The kernel family BLAS chose for this CPU (e.g. "Haswell" for AVX2, "Cooperlake" for AVX-512),
// and the OPENBLAS_CORETYPE setting that forced it, if any.
std::string blas_kernel_name();

}  // namespace dtrain
