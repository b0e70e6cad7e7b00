#include "tensor/thread_team.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace dtrain {

// Values below FLT_MIN (denormals) take the x86 cores a microcode assist each, 100 times the cost
// of a normal operation. Training produces them late in a run (Adam's second moments of tiny
// gradients, products of small weights): lenet's steps slowed to half speed from step 700 on.
// Flushing them to zero (FTZ for results, DAZ for inputs) changes values only below 1.2e-38; it is
// what TensorFlow does in its compute threads.
void flush_denormals_to_zero() {
#if defined(__x86_64__)
  _mm_setcsr(_mm_getcsr() | 0x8040);
#endif
}
namespace {

thread_local ThreadTeam* current_team = nullptr;

void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Waiting is staged: busy-spin for the few microseconds a product's partner part usually takes,
// then spin with sched_yield so that other runnable threads (another process sharing the cores,
// a descheduled partner) get the core, and a worker with no job for kSleepAfter sleeps until
// the next one.
constexpr auto kBusySpin = std::chrono::microseconds(20);
constexpr auto kSleepAfter = std::chrono::microseconds(500);

// Calls done() until it returns true, waiting in the stages above; block() is the last stage.
template <typename Done, typename Block>
void staged_wait(Done done, Block block) {
  const auto start = std::chrono::steady_clock::now();
  for (int spins = 1; !done(); ++spins) {
    if (spins % 64 != 0) {
      cpu_relax();
      continue;
    }
    const auto waited = std::chrono::steady_clock::now() - start;
    if (waited < kBusySpin) continue;
    if (waited < kSleepAfter || !block()) std::this_thread::yield();
  }
}

}  // namespace

ThreadTeam::ThreadTeam(int size) : size_(size < 1 ? 1 : size), errors_(size_) {
  for (int i = 1; i < size_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadTeam::~ThreadTeam() {
  stopping_.store(true, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  // The jthreads join here.
}

ThreadTeam* ThreadTeam::current() { return current_team; }

void ThreadTeam::run(const std::function<void(int)>& part) {
  if (size_ == 1) {
    part(0);
    return;
  }
  job_ = &part;
  job_precision_ = thread_precision();
  for (std::exception_ptr& e : errors_) e = nullptr;
  pending_.store(size_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);  // publishes job_ to the workers
  generation_.notify_all();
  try {
    part(0);
  } catch (...) {
    errors_[0] = std::current_exception();
  }
  // The caller never sleeps: its wait is one part of one product.
  staged_wait([&] { return pending_.load(std::memory_order_acquire) == 0; }, [] { return false; });
  for (const std::exception_ptr& e : errors_)
    if (e) std::rethrow_exception(e);
}

void ThreadTeam::worker_loop(int index) {
  flush_denormals_to_zero();
  uint64_t seen = 0;
  for (;;) {
    // The next product of the step is usually microseconds away; between steps it may not be.
    staged_wait([&] { return generation_.load(std::memory_order_acquire) != seen; },
                [&] {
                  generation_.wait(seen, std::memory_order_acquire);
                  return true;
                });
    seen = generation_.load(std::memory_order_acquire);
    if (stopping_.load(std::memory_order_relaxed)) return;
    try {
      const PrecisionScope precision(job_precision_);
      (*job_)(index);
    } catch (...) {
      errors_[index] = std::current_exception();
    }
    pending_.fetch_sub(1, std::memory_order_release);
  }
}

ScopedTeam::ScopedTeam(ThreadTeam* team) : previous_(current_team) {
#if defined(__x86_64__)
  previous_mxcsr_ = _mm_getcsr();
#endif
  current_team = team;
  flush_denormals_to_zero();
}

ScopedTeam::~ScopedTeam() {
  current_team = previous_;
#if defined(__x86_64__)
  _mm_setcsr(previous_mxcsr_);
#endif
}

size_t split_point(size_t size, int parts, int p) {
  if (p >= parts) return size;
  return std::min(size, size * static_cast<size_t>(p) / static_cast<size_t>(parts) / 16 * 16);
}

int parallel_parts() { return current_team == nullptr ? 1 : current_team->size(); }

void parallel_ranges(size_t n, size_t align, const std::function<void(int, size_t, size_t)>& fn) {
  const size_t parts = static_cast<size_t>(parallel_parts());
  if (parts == 1) {
    if (n > 0) fn(0, 0, n);
    return;
  }
  auto boundary = [&](size_t p) {
    return p == parts ? n : std::min(n, n * p / parts / align * align);
  };
  current_team->run([&](int p) {
    const size_t begin = boundary(p), end = boundary(p + 1);
    if (begin < end) fn(p, begin, end);
  });
}

void parallel_rows(size_t rows, size_t row_size,
                   const std::function<void(int, size_t, size_t)>& fn) {
  const int parts = parallel_parts();
  if (parts == 1) {
    if (rows > 0 && row_size > 0) fn(0, 0, rows * row_size);
    return;
  }
  current_team->run([&](int p) {
    const size_t begin = split_point(rows, parts, p), end = split_point(rows, parts, p + 1);
    if (begin < end && row_size > 0) fn(p, begin * row_size, end * row_size);
  });
}

}  // namespace dtrain
