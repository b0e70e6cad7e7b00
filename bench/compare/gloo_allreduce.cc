// One rank of the Gloo all-reduce comparison benchmark (float32 sum, in place, TCP on loopback).
// scripts/compare_allreduce.sh starts --size of these against a shared FileStore directory.
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bench/compare/compare_common.h"
#include "gloo/allreduce.h"
#include "gloo/allreduce_halving_doubling.h"
#include "gloo/allreduce_ring_chunked.h"
#include "gloo/broadcast.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/transport/tcp/device.h"

namespace {

using Clock = std::chrono::steady_clock;
// gloo::sum and gloo::max are overloaded; the options API wants this exact untyped signature.
using ReduceFn = void (*)(void*, const void*, const void*, std::size_t);

// Distinct tags keep the bookkeeping collectives apart from the measured one.
constexpr uint32_t kTagData = 1;
constexpr uint32_t kTagIters = 2;
constexpr uint32_t kTagTimes = 3;

struct Args {
  int rank = -1;
  int size = -1;
  std::string rendezvous;
  std::string algorithm;
  std::vector<std::size_t> sizes = compare::DefaultSizes();
  int iters = 0;  // 0: calibrate from the warm-up time.
};

[[noreturn]] void Usage(const char* argv0, const std::string& why) {
  std::fprintf(stderr,
               "%s: %s\nusage: %s --rank R --size N --rendezvous DIR "
               "--algorithm ring_chunked|halving_doubling|allreduce [--bytes 64K,1M] [--iters K]\n",
               argv0, why.c_str(), argv0);
  std::exit(2);
}

Args ParseArgs(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (i + 1 >= argc) Usage(argv[0], "missing value for " + std::string(flag));
    const std::string value = argv[++i];
    try {
      if (flag == "--rank") {
        args.rank = std::stoi(value);
      } else if (flag == "--size") {
        args.size = std::stoi(value);
      } else if (flag == "--rendezvous") {
        args.rendezvous = value;
      } else if (flag == "--algorithm") {
        args.algorithm = value;
      } else if (flag == "--bytes") {
        args.sizes = compare::ParseSizeList(value);
      } else if (flag == "--iters") {
        args.iters = std::stoi(value);
      } else {
        Usage(argv[0], "unknown flag " + std::string(flag));
      }
    } catch (const std::exception& e) {
      Usage(argv[0], std::string(flag) + ": " + e.what());
    }
  }
  if (args.size < 1 || args.rank < 0 || args.rank >= args.size) Usage(argv[0], "bad --rank/--size");
  if (args.rendezvous.empty()) Usage(argv[0], "--rendezvous is required");
  if (args.algorithm != "ring_chunked" && args.algorithm != "halving_doubling" &&
      args.algorithm != "allreduce") {
    Usage(argv[0], "unknown --algorithm '" + args.algorithm + "'");
  }
  if (args.iters < 0) Usage(argv[0], "--iters must be positive");
  return args;
}

// Returns the collective to time, bound to `buffer`. The legacy algorithm classes set up their
// pair buffers in the constructor, so they are built once per size and run() repeatedly.
std::function<void()> MakeAllreduce(const std::string& algorithm,
                                    const std::shared_ptr<gloo::Context>& context,
                                    std::vector<float>& buffer) {
  const std::vector<float*> ptrs{buffer.data()};
  const int count = static_cast<int>(buffer.size());
  if (algorithm == "ring_chunked") {
    auto algo = std::make_shared<gloo::AllreduceRingChunked<float>>(context, ptrs, count);
    return [algo] { algo->run(); };
  }
  if (algorithm == "halving_doubling") {
    auto algo = std::make_shared<gloo::AllreduceHalvingDoubling<float>>(context, ptrs, count);
    return [algo] { algo->run(); };
  }
  // What PyTorch's ProcessGroupGloo calls: the options API with the default algorithm.
  auto opts = std::make_shared<gloo::AllreduceOptions>(context);
  opts->setOutput(buffer.data(), buffer.size());
  opts->setReduceFunction(static_cast<ReduceFn>(&gloo::sum<float>));
  opts->setTag(kTagData);
  return [opts] { gloo::allreduce(*opts); };
}

double TimeOnce(const std::function<void()>& allreduce) {
  const auto start = Clock::now();
  allreduce();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

int BroadcastIterations(const std::shared_ptr<gloo::Context>& context, int iters) {
  gloo::BroadcastOptions opts(context);
  opts.setOutput(&iters, 1);
  opts.setRoot(0);
  opts.setTag(kTagIters);
  gloo::broadcast(opts);
  return iters;
}

// The slowest rank bounds each step of a synchronous training loop, so take the max per iteration.
void MaxOverRanks(const std::shared_ptr<gloo::Context>& context, std::vector<double>& times) {
  gloo::AllreduceOptions opts(context);
  opts.setOutput(times.data(), times.size());
  opts.setReduceFunction(static_cast<ReduceFn>(&gloo::max<double>));
  opts.setTag(kTagTimes);
  gloo::allreduce(opts);
}

int Run(const Args& args) {
  gloo::transport::tcp::attr attr;
  // Pin to loopback: otherwise gloo resolves the host name and may pick another interface.
  attr.hostname = "127.0.0.1";
  attr.ai_family = AF_INET;
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(args.rendezvous);
  auto context = std::make_shared<gloo::rendezvous::Context>(args.rank, args.size);
  context->connectFullMesh(store, device);

  const std::string impl = "gloo_" + args.algorithm;
  if (args.rank == 0) {
    std::printf(
        "# impl=%s ranks=%d transport=tcp@127.0.0.1 float32 sum in-place; median over "
        "iterations of the slowest rank's time\n",
        impl.c_str(), args.size);
    std::fflush(stdout);
  }
  for (const std::size_t bytes : args.sizes) {
    std::vector<float> buffer(bytes / sizeof(float));
    const auto allreduce = MakeAllreduce(args.algorithm, context, buffer);

    compare::FillPattern(buffer, args.rank);
    allreduce();
    if (const auto error = compare::CheckSum(buffer, args.size)) {
      std::fprintf(stderr, "%s rank %d bytes=%zu: wrong sum: %s\n", impl.c_str(), args.rank, bytes,
                   error->c_str());
      return 1;
    }
    // Zeros stay zero under repeated in-place sums; the pattern would overflow to inf.
    std::fill(buffer.begin(), buffer.end(), 0.0f);

    std::vector<double> warmup;
    for (int i = 0; i < compare::kWarmupIters; ++i) warmup.push_back(TimeOnce(allreduce));
    int iters = args.iters > 0 ? args.iters : compare::IterationsFor(compare::Median(warmup));
    iters = BroadcastIterations(context, iters);

    std::vector<double> times(iters);
    for (double& t : times) t = TimeOnce(allreduce);
    MaxOverRanks(context, times);
    if (args.rank == 0) compare::PrintResult(impl, args.size, bytes, compare::Median(times));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = ParseArgs(argc, argv);
  try {
    return Run(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "compare_gloo_allreduce rank %d: %s\n", args.rank, e.what());
    return 1;
  }
}
