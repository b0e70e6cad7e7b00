// The choice of OpenBLAS's kernels from the CPU's ISA flags, and the configuration line's account
// of it; the real binary re-executing itself on the chosen kernels, in a simulation of a CPU that
// OpenBLAS's table does not know.
#include "tensor/blas_kernels.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "support/process.h"
#include "tensor/blas.h"

namespace dtrain {
namespace {

constexpr CpuIsa kSse{};
constexpr CpuIsa kAvx{.avx = true};
constexpr CpuIsa kAvx2{.avx = true, .avx2 = true, .fma = true};
constexpr CpuIsa kAvx512{.avx = true,
                         .avx2 = true,
                         .fma = true,
                         .avx512f = true,
                         .avx512bw = true,
                         .avx512vl = true,
                         .avx512dq = true};

std::string best(const CpuIsa& isa) {
  const std::optional<CoreChoice> choice = best_openblas_core(isa);
  return choice ? choice->core + "/" + choice->isa : "none";
}

TEST(BlasKernels, BestKernelsFollowTheIsaFlags) {
  EXPECT_EQ(best(kAvx512), "SkylakeX/avx512f");
  EXPECT_EQ(best(kAvx2), "Haswell/avx2");
  EXPECT_EQ(best(kAvx), "Sandybridge/avx");
  EXPECT_EQ(best(kSse), "none");
  CpuIsa no_dq = kAvx512;
  no_dq.avx512dq = false;  // SkylakeX's kernels use DQ: without it, AVX2's
  EXPECT_EQ(best(no_dq), "Haswell/avx2");
  CpuIsa no_fma = kAvx2;
  no_fma.fma = false;
  EXPECT_EQ(best(no_fma), "Sandybridge/avx");
}

TEST(BlasKernels, GenerationsOfOpenBlasNames) {
  EXPECT_EQ(openblas_core_generation("Prescott"), 1);
  EXPECT_EQ(openblas_core_generation("Nehalem"), 1);
  EXPECT_EQ(openblas_core_generation("Sandybridge"), 2);
  EXPECT_EQ(openblas_core_generation("Haswell"), 3);
  EXPECT_EQ(openblas_core_generation("Zen"), 3);
  EXPECT_EQ(openblas_core_generation("zen"), 3) << "OpenBLAS compares names case-blind";
  EXPECT_EQ(openblas_core_generation("SkylakeX"), 4);
  EXPECT_EQ(openblas_core_generation("Cooperlake"), 4);
  EXPECT_EQ(openblas_core_generation("Neoverse"), 0);
  EXPECT_EQ(openblas_core_generation(""), 0);
  EXPECT_GT(openblas_core_generation(blas_kernel_name()), 0)
      << "this machine's OpenBLAS picked " << blas_kernel_name() << ", a name the table lacks";
}

TEST(BlasKernels, ReplacesOnlyAnOlderGeneration) {
  auto better = [](const CpuIsa& isa, const char* picked) {
    const std::optional<CoreChoice> choice = better_openblas_core(isa, picked);
    return choice ? choice->core : "none";
  };
  EXPECT_EQ(better(kAvx512, "Prescott"), "SkylakeX");  // a Xeon newer than OpenBLAS's table
  EXPECT_EQ(better(kAvx512, "Zen"), "SkylakeX");       // a Zen 4, AVX-512 to OpenBLAS's AVX2
  EXPECT_EQ(better(kAvx512, "Cooperlake"), "none");
  EXPECT_EQ(better(kAvx2, "Zen"), "Haswell");  // the same kernels, Haswell's blocks faster
  EXPECT_EQ(better(kAvx2, "Haswell"), "none");
  EXPECT_EQ(better(kAvx2, "Prescott"), "Haswell");
  EXPECT_EQ(better(kAvx2, "SkylakeX"), "none");   // never a step down
  EXPECT_EQ(better(kAvx512, "Unknown"), "none");  // a name it does not know is left alone
  EXPECT_EQ(better(kSse, "Prescott"), "none");
}

// Sets one environment variable for a test's duration, and puts back what was there.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedVariable() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedVariable(const ScopedVariable&) = delete;
  ScopedVariable& operator=(const ScopedVariable&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(BlasKernels, LineSaysWhyTheseKernels) {
  {
    ScopedVariable set("OPENBLAS_CORETYPE", "SkylakeX");
    ScopedVariable choice(kBlasChoiceVariable, "SkylakeX avx512f Prescott");
    EXPECT_EQ(blas_kernels_line("SkylakeX"),
              "OpenBLAS SkylakeX (chosen for avx512f; OpenBLAS itself picked Prescott)");
  }
  {
    ScopedVariable set("OPENBLAS_CORETYPE", "Haswell");
    ScopedVariable choice(kBlasChoiceVariable, "Haswell avx2 -");  // Python's, before loading
    EXPECT_EQ(blas_kernels_line("Haswell"), "OpenBLAS Haswell (chosen for avx2)");
  }
  {
    ScopedVariable set("OPENBLAS_CORETYPE", "Sandybridge");
    ScopedVariable choice(kBlasChoiceVariable, nullptr);
    EXPECT_EQ(blas_kernels_line("Sandybridge"),
              "OpenBLAS Sandybridge (OPENBLAS_CORETYPE=Sandybridge)");
  }
  const std::optional<CoreChoice> here = best_openblas_core(cpu_isa());
  ASSERT_TRUE(here) << "a CPU without AVX";
  {
    ScopedVariable set("OPENBLAS_CORETYPE", nullptr);
    ScopedVariable choice(kBlasChoiceVariable, nullptr);
    EXPECT_EQ(blas_kernels_line("Neoverse"), "OpenBLAS Neoverse");
    EXPECT_EQ(blas_kernels_line(here->core),
              "OpenBLAS " + here->core + " (OpenBLAS's pick, the best for " + here->isa + ")");
    // OpenBLAS's own older pick that dtrain could not replace names the setting that would.
    EXPECT_EQ(blas_kernels_line("Prescott"), "OpenBLAS Prescott (OpenBLAS's pick; the best for " +
                                                 here->isa + " is " + here->core +
                                                 ": set OPENBLAS_CORETYPE=" + here->core +
                                                 " before the program starts)");
  }
  {
    // dtrain set the variable, but OpenBLAS had loaded already (numpy imported first).
    ScopedVariable set("OPENBLAS_CORETYPE", here->core.c_str());
    const std::string marker = here->core + " " + here->isa + " -";
    ScopedVariable choice(kBlasChoiceVariable, marker.c_str());
    EXPECT_EQ(blas_kernels_line("Prescott").rfind("OpenBLAS Prescott (OpenBLAS's pick;", 0), 0u)
        << blas_kernels_line("Prescott");
  }
}

// The configuration line of a short real run, from its output.
std::string kernels_line(const testing::ProcessResult& run) {
  const size_t at = run.out.find("kernels OpenBLAS");
  if (at == std::string::npos) return "";
  // The reason in parentheses may hold a ';' of its own; the layers' kernels follow after one.
  const size_t reason = run.out.find(" (", at);
  const size_t end = run.out.find_first_of(";\n", at);
  if (reason < end) return run.out.substr(at, run.out.find(')', reason) + 1 - at);
  return run.out.substr(at, end - at);
}

std::vector<std::string> short_run(std::vector<std::string> env_prefix) {
  std::vector<std::string> argv = {"env", "-u", "OPENBLAS_CORETYPE", "-u", kBlasChoiceVariable};
  argv.insert(argv.end(), env_prefix.begin(), env_prefix.end());
  argv.insert(argv.end(),
              {DTRAIN_BINARY, "bench", "train", "--model", "mnist_inference", "--threads", "1",
               "--warmup_secs", "0", "--secs", "0.05", "--reps", "1", "--gemm", "openblas"});
  return argv;
}

TEST(BlasKernels, TheBinaryRunsOnTheKernelsItChose) {
  const std::optional<CoreChoice> here = best_openblas_core(cpu_isa());
  ASSERT_TRUE(here) << "a CPU without AVX";
  // Nothing set: OpenBLAS's own pick where it is the best, else the binary's choice.
  const testing::ProcessResult own = testing::run_command(short_run({}));
  ASSERT_EQ(own.exit_code, 0) << own.out << own.err;
  if (better_openblas_core(cpu_isa(), blas_kernel_name())) {
    EXPECT_EQ(kernels_line(own), "kernels OpenBLAS " + here->core + " (chosen for " + here->isa +
                                     "; OpenBLAS itself picked " + blas_kernel_name() + ")");
  } else {
    EXPECT_EQ(kernels_line(own), "kernels OpenBLAS " + blas_kernel_name() +
                                     " (OpenBLAS's pick, the best for " + here->isa + ")");
  }
  // OpenBLAS picking SSE3's kernels, as on a Xeon newer than its table: the binary starts itself
  // again with OPENBLAS_CORETYPE set, and OpenBLAS then runs the chosen kernels.
  const testing::ProcessResult chosen =
      testing::run_command(short_run({std::string(kSimulatedPickVariable) + "=Prescott"}));
  ASSERT_EQ(chosen.exit_code, 0) << chosen.out << chosen.err;
  EXPECT_EQ(kernels_line(chosen), "kernels OpenBLAS " + here->core + " (chosen for " + here->isa +
                                      "; OpenBLAS itself picked Prescott)");
  // The user's setting is obeyed, even an older one.
  const testing::ProcessResult obeyed = testing::run_command(short_run(
      {"OPENBLAS_CORETYPE=Sandybridge", std::string(kSimulatedPickVariable) + "=Prescott"}));
  ASSERT_EQ(obeyed.exit_code, 0) << obeyed.out << obeyed.err;
  EXPECT_EQ(kernels_line(obeyed), "kernels OpenBLAS Sandybridge (OPENBLAS_CORETYPE=Sandybridge)");
}

}  // namespace
}  // namespace dtrain
