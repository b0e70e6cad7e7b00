// MPI all-reduce comparison benchmark (MPI_Allreduce, float32 sum, MPI_IN_PLACE), started by
// mpirun from scripts/compare_allreduce.sh with the TCP BTL on loopback.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "bench/compare/compare_common.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::vector<std::size_t> sizes = compare::DefaultSizes();
  int iters = 0;  // 0: calibrate from the warm-up time.
};

// MPI_Abort rather than exit: a lone exiting rank would leave the others blocked in a collective.
[[noreturn]] void Fail(int rank, const std::string& why) {
  std::fprintf(stderr, "compare_mpi_allreduce rank %d: %s\n", rank, why.c_str());
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

Args ParseArgs(int argc, char** argv, int rank) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (i + 1 >= argc) Fail(rank, "missing value for " + std::string(flag));
    const std::string value = argv[++i];
    try {
      if (flag == "--bytes") {
        args.sizes = compare::ParseSizeList(value);
      } else if (flag == "--iters") {
        args.iters = std::stoi(value);
      } else {
        Fail(rank, "unknown flag " + std::string(flag) + " (usage: [--bytes 64K,1M] [--iters K])");
      }
    } catch (const std::exception& e) {
      Fail(rank, std::string(flag) + ": " + e.what());
    }
  }
  if (args.iters < 0) Fail(rank, "--iters must be positive");
  return args;
}

double TimeOnce(std::vector<float>& buffer) {
  const auto start = Clock::now();
  MPI_Allreduce(MPI_IN_PLACE, buffer.data(), static_cast<int>(buffer.size()), MPI_FLOAT, MPI_SUM,
                MPI_COMM_WORLD);
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  int ranks = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const Args args = ParseArgs(argc, argv, rank);

#ifdef OPEN_MPI
  const std::string impl = "openmpi";
#else
  const std::string impl = "mpi";
#endif
  if (rank == 0) {
    std::printf(
        "# impl=%s ranks=%d MPI_Allreduce float32 sum MPI_IN_PLACE; median over iterations of "
        "the slowest rank's time\n",
        impl.c_str(), ranks);
    std::fflush(stdout);
  }
  for (const std::size_t bytes : args.sizes) {
    std::vector<float> buffer(bytes / sizeof(float));
    compare::FillPattern(buffer, rank);
    TimeOnce(buffer);
    if (const auto error = compare::CheckSum(buffer, ranks)) {
      Fail(rank, "bytes=" + std::to_string(bytes) + ": wrong sum: " + *error);
    }
    // Zeros stay zero under repeated in-place sums; the pattern would overflow to inf.
    std::fill(buffer.begin(), buffer.end(), 0.0f);

    std::vector<double> warmup;
    for (int i = 0; i < compare::kWarmupIters; ++i) warmup.push_back(TimeOnce(buffer));
    // Rank 0 decides so that every rank runs the same number of collectives.
    int iters = args.iters > 0 ? args.iters : compare::IterationsFor(compare::Median(warmup));
    MPI_Bcast(&iters, 1, MPI_INT, 0, MPI_COMM_WORLD);

    std::vector<double> times(iters);
    for (double& t : times) t = TimeOnce(buffer);
    // The slowest rank bounds each step of a synchronous training loop, so take the max.
    std::vector<double> slowest(rank == 0 ? iters : 0);
    MPI_Reduce(times.data(), slowest.data(), iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) compare::PrintResult(impl, ranks, bytes, compare::Median(slowest));
  }
  MPI_Finalize();
  return 0;
}
