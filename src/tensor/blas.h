// Matrix products through BLAS (OpenBLAS cblas_sgemm), row-major, and control of BLAS's own
// threads. Every matmul in dtrain goes through gemm() so the kernel choice and thread count live in
// one place.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace dtrain {

enum class Trans { kNo, kYes };

// The library that computes gemm()'s products: oneDNN's dnnl_sgemm (the default: it picks its
// kernels from the CPU's ISA flags at run time, and measured at least as fast as OpenBLAS's best
// on every model's products, docs/benchmarks.md), or OpenBLAS's cblas_sgemm. Process-wide.
enum class GemmLibrary { kOpenBlas, kOneDnn };
void set_gemm_library(GemmLibrary library);
GemmLibrary gemm_library();
// "openblas" | "onednn"; parse_gemm_library throws std::invalid_argument naming the choices.
const char* gemm_library_name(GemmLibrary library);
GemmLibrary parse_gemm_library(std::string_view name);
// The ISA oneDNN's kernels use here, as oneDNN names it ("avx2", "avx512_core_amx"); it heeds
// ONEDNN_MAX_CPU_ISA.
std::string onednn_isa_name();
// The configuration line's words for gemm()'s kernels: "oneDNN sgemm (avx2)", or OpenBLAS's with
// why (tensor/blas_kernels.h).
std::string gemm_kernels_line();

// The arithmetic of gemm()'s products: fp32, or bf16 inputs with fp32 sums and outputs
// (tensor/bf16_gemm.h). Master weights, optimizer slots and everything outside the products stay
// fp32 either way.
enum class Precision { kFp32, kBf16 };
// "fp32" | "bf16"; parse_precision throws std::invalid_argument naming the choices.
const char* precision_name(Precision precision);
Precision parse_precision(std::string_view name);
// The precision of the gemm() calls this thread makes while the scope lives (a training step's),
// whichever threads of its team run their parts; fp32 outside every scope.
class PrecisionScope {
 public:
  explicit PrecisionScope(Precision precision);
  ~PrecisionScope();
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  Precision previous_;
};
Precision thread_precision();

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

// One call of gemm(), as a benchmark replays it (bench/gemm_bench.h): its shape, layout and split.
struct GemmCall {
  Trans trans_a = Trans::kNo;
  Trans trans_b = Trans::kNo;
  int m = 0, n = 0, k = 0;
  int lda = 0, ldb = 0, ldc = 0;
  bool accumulate = false;  // beta != 0
  Split split = Split::kAuto;
};
// While set, every gemm() call on any thread is passed to `observer` before it runs; nullptr
// stops. For benchmarks, not for concurrent training: set it with no product running.
void set_gemm_observer(void (*observer)(const GemmCall& call));

// Threads BLAS may use for one call. dtrain owns this count: BLAS's pool and our own threads share
// the cores, and oversubscribing two cores halves throughput.
void blas_set_threads(int threads);
int blas_threads();
// The kernel set OpenBLAS runs (e.g. "Haswell" for AVX2, "SkylakeX" for AVX-512), as it chose it
// or OPENBLAS_CORETYPE forced it (tensor/blas_kernels.h says which and why).
std::string blas_kernel_name();

}  // namespace dtrain
