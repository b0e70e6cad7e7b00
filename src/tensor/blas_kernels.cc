#include "tensor/blas_kernels.h"

#include <fmt/format.h>
#include <strings.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <sstream>

extern "C" {
char* openblas_get_corename(void);
}

namespace dtrain {
namespace {

struct Generation {
  const char* core;
  int generation;
};

// OpenBLAS 0.3's x86-64 kernel sets (its DYNAMIC_ARCH list) by the newest ISA their kernels use.
// Excavator's and Steamroller's kernels are Piledriver's (AVX with FMA, no AVX2).
constexpr std::array kGenerations = {
    Generation{"Prescott", 1},   Generation{"Core2", 1},      Generation{"Penryn", 1},
    Generation{"Dunnington", 1}, Generation{"Nehalem", 1},    Generation{"Atom", 1},
    Generation{"Nano", 1},       Generation{"Opteron", 1},    Generation{"Opteron_SSE3", 1},
    Generation{"Barcelona", 1},  Generation{"Bobcat", 1},     Generation{"Sandybridge", 2},
    Generation{"Bulldozer", 2},  Generation{"Piledriver", 2}, Generation{"Steamroller", 2},
    Generation{"Excavator", 2},  Generation{"Haswell", 3},    Generation{"Zen", 3},
    Generation{"SkylakeX", 4},   Generation{"Cooperlake", 4}, Generation{"SapphireRapids", 4},
};

bool same_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

}  // namespace

CpuIsa cpu_isa() {
  // libgcc's answers include the OS's: AVX and AVX-512 count only where XSAVE enables their state.
  __builtin_cpu_init();
  return {.avx = __builtin_cpu_supports("avx") != 0,
          .avx2 = __builtin_cpu_supports("avx2") != 0,
          .fma = __builtin_cpu_supports("fma") != 0,
          .avx512f = __builtin_cpu_supports("avx512f") != 0,
          .avx512bw = __builtin_cpu_supports("avx512bw") != 0,
          .avx512vl = __builtin_cpu_supports("avx512vl") != 0,
          .avx512dq = __builtin_cpu_supports("avx512dq") != 0};
}

std::optional<CoreChoice> best_openblas_core(const CpuIsa& isa) {
  // SkylakeX's kernels need the F, BW, VL and DQ subsets. Cooperlake's single-precision kernels
  // are SkylakeX's (they add only bf16 products, which dtrain does not call through OpenBLAS), and
  // OpenBLAS 0.3.21 does not find "Cooperlake" as a setting.
  if (isa.avx512f && isa.avx512bw && isa.avx512vl && isa.avx512dq)
    return CoreChoice{"SkylakeX", "avx512f"};
  if (isa.avx2 && isa.fma) return CoreChoice{"Haswell", "avx2"};
  if (isa.avx) return CoreChoice{"Sandybridge", "avx"};
  return std::nullopt;
}

int openblas_core_generation(std::string_view core) {
  for (const Generation& g : kGenerations) {
    if (same_name(core, g.core)) return g.generation;
  }
  return 0;
}

std::optional<CoreChoice> better_openblas_core(const CpuIsa& isa, std::string_view picked) {
  const std::optional<CoreChoice> best = best_openblas_core(isa);
  const int from = openblas_core_generation(picked);
  if (!best || from == 0) return std::nullopt;
  if (openblas_core_generation(best->core) > from) return best;
  // Zen's set is Haswell's kernels with other block sizes, and measured slower than Haswell's on
  // a Zen 3 (bench train, 2 threads, 9 rounds interleaved: mnist_inference 0.91x, lenet 0.96x).
  if (same_name(picked, "Zen") && best->core == "Haswell") return best;
  return std::nullopt;
}

void choose_blas_kernels(char** argv) {
  // Either the user chose, or this process is the one choose_blas_kernels started.
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr || std::getenv(kBlasChoiceVariable) != nullptr)
    return;
  // The simulation stands in for a CPU newer than OpenBLAS's table, where none is at hand.
  const char* simulated = std::getenv(kSimulatedPickVariable);
  const std::string picked = simulated != nullptr ? simulated : openblas_get_corename();
  const std::optional<CoreChoice> better = better_openblas_core(cpu_isa(), picked);
  if (!better) return;
  // OpenBLAS reads the setting once, as it loads: only a new image of the program sees it.
  setenv("OPENBLAS_CORETYPE", better->core.c_str(), 1);
  setenv(kBlasChoiceVariable, fmt::format("{} {} {}", better->core, better->isa, picked).c_str(),
         1);
  execv("/proc/self/exe", argv);
  // No exec: run on OpenBLAS's pick, and leave the environment as it found it.
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv(kBlasChoiceVariable);
}

std::string blas_kernels_line(std::string_view running) {
  const std::string set = environment("OPENBLAS_CORETYPE");
  std::istringstream choice(environment(kBlasChoiceVariable));
  std::string core;
  std::string isa;
  std::string picked;
  const bool chosen = choice >> core >> isa >> picked && same_name(core, set);
  if (chosen && same_name(running, core)) {
    if (picked == "-") return fmt::format("OpenBLAS {} (chosen for {})", running, isa);
    return fmt::format("OpenBLAS {} (chosen for {}; OpenBLAS itself picked {})", running, isa,
                       picked);
  }
  if (!set.empty() && !chosen)
    return fmt::format("OpenBLAS {} (OPENBLAS_CORETYPE={})", running, set);
  // OpenBLAS's own pick: OPENBLAS_CORETYPE unset, or set by dtrain after OpenBLAS had loaded (a
  // Python program that imported numpy first).
  const CpuIsa cpu = cpu_isa();
  const std::optional<CoreChoice> best = best_openblas_core(cpu);
  if (!best || openblas_core_generation(running) == 0) return fmt::format("OpenBLAS {}", running);
  if (const std::optional<CoreChoice> better = better_openblas_core(cpu, running)) {
    return fmt::format(
        "OpenBLAS {} (OpenBLAS's pick; the best for {} is {}: set OPENBLAS_CORETYPE={} before "
        "the program starts)",
        running, better->isa, better->core, better->core);
  }
  return fmt::format("OpenBLAS {} (OpenBLAS's pick, the best for {})", running, best->isa);
}

}  // namespace dtrain
