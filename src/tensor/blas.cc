// OpenBLAS binding.
#include "tensor/blas.h"

#include <cblas.h>

#include "tensor/thread_team.h"

extern "C" {
// OpenBLAS extensions, not part of the CBLAS standard header on every distribution.
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);
char* openblas_get_corename(void);
}

namespace dtrain {

namespace {

void serial_gemm(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha, const float* a,
                 int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, trans_a == Trans::kYes ? CblasTrans : CblasNoTrans,
              trans_b == Trans::kYes ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb,
              beta, c, ldc);
}

// Below this many flops a product is faster on one thread than split (a split costs a few µs).
constexpr double kMinParallelFlops = 2e6;

}  // namespace

void gemm(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc, Split split) {
  ThreadTeam* team = ThreadTeam::current();
  if (split == Split::kNone || team == nullptr || team->size() == 1 ||
      2.0 * m * n * k < kMinParallelFlops) {
    serial_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  const int parts = team->size();
  // Parts start at split_point(), the boundaries every parallel pass of the team uses.
  if (split == Split::kAuto) split = n >= 32 * parts ? Split::kColumns : Split::kRows;
  if (split == Split::kColumns) {
    team->run([&](int p) {
      const int begin = static_cast<int>(split_point(n, parts, p));
      const int end = static_cast<int>(split_point(n, parts, p + 1));
      if (begin == end) return;
      const float* b_part =
          trans_b == Trans::kNo ? b + begin : b + static_cast<size_t>(begin) * ldb;
      serial_gemm(trans_a, trans_b, m, end - begin, k, alpha, a, lda, b_part, ldb, beta, c + begin,
                  ldc);
    });
  } else {
    team->run([&](int p) {
      const int begin = static_cast<int>(split_point(m, parts, p));
      const int end = static_cast<int>(split_point(m, parts, p + 1));
      if (begin == end) return;
      const float* a_part =
          trans_a == Trans::kNo ? a + static_cast<size_t>(begin) * lda : a + begin;
      serial_gemm(trans_a, trans_b, end - begin, n, k, alpha, a_part, lda, b, ldb, beta,
                  c + static_cast<size_t>(begin) * ldc, ldc);
    });
  }
}

void blas_set_threads(int threads) { openblas_set_num_threads(threads < 1 ? 1 : threads); }

int blas_threads() { return openblas_get_num_threads(); }

std::string blas_kernel_name() { return openblas_get_corename(); }

}  // namespace dtrain
