// A fixed team of threads that runs one small parallel job at a time: the intra-op parallelism of
// --threads. Each matrix product of a step is split into one part per thread; the parts are too
// short (a few hundred microseconds) for a thread pool with queues and sleeping workers, so the
// workers spin for a while between jobs and only then sleep.
//
// The team a thread uses is thread-local (ThreadTeam::current()), so gemm() needs no extra
// argument and every tower of --towers can have its own team. Each part runs in its caller's
// precision (PrecisionScope, tensor/blas.h), so a layer that splits its batch over the team
// computes every part's products alike.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

#include "tensor/blas.h"

namespace dtrain {

class ThreadTeam {
 public:
  // size >= 1 threads in all: the caller of run() and size - 1 owned workers.
  explicit ThreadTeam(int size);
  ~ThreadTeam();
  ThreadTeam(const ThreadTeam&) = delete;
  ThreadTeam& operator=(const ThreadTeam&) = delete;

  int size() const { return size_; }

  // Calls part(i) for every i in [0, size()), part 0 in the calling thread, and returns when all
  // are done. Rethrows the first exception a part threw. Not reentrant: a part must not call
  // run() on the same team.
  void run(const std::function<void(int)>& part);

  // The team gemm() and parallel loops of the calling thread use; nullptr means run serially.
  static ThreadTeam* current();

 private:
  void worker_loop(int index);

  const int size_;
  const std::function<void(int)>* job_ = nullptr;
  Precision job_precision_ = Precision::kFp32;  // the caller's: each part's products run in it
  std::atomic<uint64_t> generation_{0};  // bumped once per job; workers wait for it to change
  std::atomic<int> pending_{0};          // workers still running the current job
  std::atomic<bool> stopping_{false};
  std::vector<std::exception_ptr> errors_;
  std::vector<std::jthread> workers_;
};

// Makes team the current team of this thread for the guard's lifetime, and has the thread flush
// denormal floats to zero meanwhile, as the team's workers always do (see the .cc).
class ScopedTeam {
 public:
  explicit ScopedTeam(ThreadTeam* team);
  ~ScopedTeam();
  ScopedTeam(const ScopedTeam&) = delete;
  ScopedTeam& operator=(const ScopedTeam&) = delete;

 private:
  ThreadTeam* previous_;
  unsigned previous_mxcsr_ = 0;  // x86's floating-point control flags before the guard
};

// Sets this thread's FTZ and DAZ flags.
void flush_denormals_to_zero();

// Where part p of `parts` starts when the team divides `size` rows or columns: size·p/parts
// rounded down to a multiple of 16 (size for p == parts). gemm() and parallel_rows() both cut
// here, so a pass over a weight's rows gives each core the rows its products left in its cache.
size_t split_point(size_t size, int parts, int p);

// Splits [0, n) into one contiguous range per thread of the current team, each starting on a
// multiple of align, and calls fn(part, begin, end) for the non-empty ones; part is in
// [0, parallel_parts()). Serial (one part) without a team.
void parallel_ranges(size_t n, size_t align, const std::function<void(int, size_t, size_t)>& fn);

// Splits `rows` rows of row_size values at split_point() and calls fn(part, begin, end) with each
// part's value range [begin, end) (row-aligned), for the non-empty ones.
void parallel_rows(size_t rows, size_t row_size,
                   const std::function<void(int, size_t, size_t)>& fn);

// The parts parallel_ranges() splits into on this thread: the current team's size, or 1.
int parallel_parts();

}  // namespace dtrain
