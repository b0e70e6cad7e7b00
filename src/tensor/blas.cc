// OpenBLAS binding.
#include "tensor/blas.h"

#include <cblas.h>
#include <fmt/format.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <atomic>
#include <stdexcept>

#include "tensor/bf16_gemm.h"
#include "tensor/blas_kernels.h"
#include "tensor/thread_team.h"

extern "C" {
// OpenBLAS extensions, not part of the CBLAS standard header on every distribution.
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);
char* openblas_get_corename(void);
}

namespace dtrain {

namespace {

std::atomic<GemmLibrary> library{GemmLibrary::kOneDnn};
std::atomic<void (*)(const GemmCall&)> observer{nullptr};
thread_local Precision precision_here = Precision::kFp32;

void onednn_gemm(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha, const float* a,
                 int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  // oneDNN asks OpenMP how many threads it may use; each of dtrain's threads is one part of a
  // split already (see conv_onednn.cc), so its answer is 1 for the call. Put back after, as the
  // calling thread may be a program's own (Python's), whose other OpenMP users it must not slow.
  const int threads = omp_get_max_threads();
  if (threads != 1) omp_set_num_threads(1);
  // Row-major, as here; its only failures are arguments gemm()'s callers never pass.
  dnnl_sgemm(trans_a == Trans::kYes ? 'T' : 'N', trans_b == Trans::kYes ? 'T' : 'N', m, n, k, alpha,
             a, lda, b, ldb, beta, c, ldc);
  if (threads != 1) omp_set_num_threads(threads);
}

void serial_gemm(Precision precision, Trans trans_a, Trans trans_b, int m, int n, int k,
                 float alpha, const float* a, int lda, const float* b, int ldb, float beta,
                 float* c, int ldc) {
  if (precision == Precision::kBf16) {
    bf16_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if (library.load(std::memory_order_relaxed) == GemmLibrary::kOneDnn) {
    onednn_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  cblas_sgemm(CblasRowMajor, trans_a == Trans::kYes ? CblasTrans : CblasNoTrans,
              trans_b == Trans::kYes ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb,
              beta, c, ldc);
}

// Below this many flops a product is faster on one thread than split (a split costs a few µs).
constexpr double kMinParallelFlops = 2e6;

}  // namespace

void gemm(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc, Split split) {
  if (auto* watch = observer.load(std::memory_order_relaxed)) {
    watch({trans_a, trans_b, m, n, k, lda, ldb, ldc, beta != 0.0f, split});
  }
  // The caller's, for every part; fp32 for a product bf16 would slow down.
  const Precision precision = precision_here == Precision::kBf16 && bf16_gemm_pays(m, n, k)
                                  ? Precision::kBf16
                                  : Precision::kFp32;
  ThreadTeam* team = ThreadTeam::current();
  if (split == Split::kNone || team == nullptr || team->size() == 1 ||
      2.0 * m * n * k < kMinParallelFlops) {
    serial_gemm(precision, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
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
      serial_gemm(precision, trans_a, trans_b, m, end - begin, k, alpha, a, lda, b_part, ldb, beta,
                  c + begin, ldc);
    });
  } else {
    team->run([&](int p) {
      const int begin = static_cast<int>(split_point(m, parts, p));
      const int end = static_cast<int>(split_point(m, parts, p + 1));
      if (begin == end) return;
      const float* a_part =
          trans_a == Trans::kNo ? a + static_cast<size_t>(begin) * lda : a + begin;
      serial_gemm(precision, trans_a, trans_b, end - begin, n, k, alpha, a_part, lda, b, ldb, beta,
                  c + static_cast<size_t>(begin) * ldc, ldc);
    });
  }
}

PrecisionScope::PrecisionScope(Precision precision) : previous_(precision_here) {
  precision_here = precision;
}

PrecisionScope::~PrecisionScope() { precision_here = previous_; }

Precision thread_precision() { return precision_here; }

const char* precision_name(Precision precision) {
  return precision == Precision::kBf16 ? "bf16" : "fp32";
}

Precision parse_precision(std::string_view name) {
  if (name == "fp32") return Precision::kFp32;
  if (name == "bf16") return Precision::kBf16;
  throw std::invalid_argument(fmt::format("'{}' is not a precision: fp32 | bf16", name));
}

void set_gemm_observer(void (*watch)(const GemmCall& call)) { observer.store(watch); }

void set_gemm_library(GemmLibrary chosen) { library.store(chosen); }

GemmLibrary gemm_library() { return library.load(); }

const char* gemm_library_name(GemmLibrary chosen) {
  return chosen == GemmLibrary::kOneDnn ? "onednn" : "openblas";
}

GemmLibrary parse_gemm_library(std::string_view name) {
  if (name == "openblas") return GemmLibrary::kOpenBlas;
  if (name == "onednn") return GemmLibrary::kOneDnn;
  throw std::invalid_argument(fmt::format("'{}' is not a GEMM library: openblas | onednn", name));
}

std::string onednn_isa_name() {
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41:
      return "sse41";
    case dnnl_cpu_isa_avx:
      return "avx";
    case dnnl_cpu_isa_avx2:
      return "avx2";
    case dnnl_cpu_isa_avx2_vnni:
      return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core:
      return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "isa " + std::to_string(static_cast<int>(dnnl_get_effective_cpu_isa()));
  }
}

std::string gemm_kernels_line() {
  if (gemm_library() == GemmLibrary::kOneDnn) return "oneDNN sgemm (" + onednn_isa_name() + ")";
  return blas_kernels_line(blas_kernel_name());
}

void blas_set_threads(int threads) { openblas_set_num_threads(threads < 1 ? 1 : threads); }

int blas_threads() { return openblas_get_num_threads(); }

std::string blas_kernel_name() { return openblas_get_corename(); }

}  // namespace dtrain
