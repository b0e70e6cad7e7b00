// Which of OpenBLAS's kernel sets runs dtrain's matrix products. OpenBLAS picks one from a table
// of CPU models, and a model newer than the table gets its oldest kernels (SSE3's "Prescott" on
// a Xeon that has AVX-512): dtrain chooses from the CPU's ISA flags instead, by setting
// OPENBLAS_CORETYPE before OpenBLAS loads. An OPENBLAS_CORETYPE the user set is obeyed.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace dtrain {

// The x86 ISA extensions OpenBLAS's kernel sets are built on, as this CPU and its OS support them.
struct CpuIsa {
  bool avx = false;
  bool avx2 = false;
  bool fma = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
};
CpuIsa cpu_isa();

// A kernel set and the ISA flag it was chosen for, e.g. {"SkylakeX", "avx512f"}.
struct CoreChoice {
  std::string core;
  std::string isa;
};

// The newest kernel set this ISA runs; nothing on a CPU without AVX, where OpenBLAS's own pick
// stands.
std::optional<CoreChoice> best_openblas_core(const CpuIsa& isa);

// The ISA generation an OpenBLAS core name stands for: 1 SSE, 2 AVX, 3 AVX2 with FMA, 4 AVX-512;
// 0 for a name this table does not know (left alone).
int openblas_core_generation(std::string_view core);

// The kernel set to use instead of OpenBLAS's own pick `picked`: the best for `isa` when it is a
// newer generation, or the same kernels measured faster (Haswell's for Zen's); else nothing.
std::optional<CoreChoice> better_openblas_core(const CpuIsa& isa, std::string_view picked);

// Called first in main(), before anything runs: when OPENBLAS_CORETYPE is unset and OpenBLAS
// picked an older kernel set than the CPU supports, runs this program again (/proc/self/exe, the
// same arguments) with OPENBLAS_CORETYPE set, and so does not return. Children inherit the
// setting, so a launcher's tasks start on the chosen kernels at once. Returns if it has nothing
// to do or the exec fails (then OpenBLAS's pick stands, as before).
void choose_blas_kernels(char** argv);

// Set by whoever chose OPENBLAS_CORETYPE for the user (choose_blas_kernels, or Python's import
// before it loads the extension): "CORE ISA PICKED", PICKED "-" when OpenBLAS's own pick was not
// known.
inline constexpr const char* kBlasChoiceVariable = "DTRAIN_BLAS_CHOICE";
// Tests only: choose_blas_kernels takes this for OpenBLAS's own pick (say "Prescott"), to run the
// whole choice on a CPU that OpenBLAS's table knows.
inline constexpr const char* kSimulatedPickVariable = "DTRAIN_SIMULATE_OPENBLAS_PICK";

// The configuration line's words for the kernel set `running`, and why: "OpenBLAS SkylakeX
// (chosen for avx512f; OpenBLAS itself picked Prescott)", "OpenBLAS Haswell (OPENBLAS_CORETYPE=
// Haswell)", "OpenBLAS Zen (OpenBLAS's pick, the best for avx2)", or for an older pick that
// dtrain could not replace (OpenBLAS had loaded before it could choose) the setting that would.
std::string blas_kernels_line(std::string_view running);

}  // namespace dtrain
