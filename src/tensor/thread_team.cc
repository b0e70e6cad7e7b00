#include "tensor/thread_team.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace dtrain {
namespace {

thread_local ThreadTeam* current_team = nullptr;

// A worker that has had no job for this long sleeps until the next one, giving the core back.
constexpr auto kSpinTime = std::chrono::microseconds(500);

void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
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
  for (std::exception_ptr& e : errors_) e = nullptr;
  pending_.store(size_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);  // publishes job_ to the workers
  generation_.notify_all();
  try {
    part(0);
  } catch (...) {
    errors_[0] = std::current_exception();
  }
  while (pending_.load(std::memory_order_acquire) != 0) cpu_relax();
  for (const std::exception_ptr& e : errors_)
    if (e) std::rethrow_exception(e);
}

void ThreadTeam::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    // Spin briefly (the next product of the step is microseconds away), then sleep.
    const auto spin_until = std::chrono::steady_clock::now() + kSpinTime;
    uint64_t generation;
    for (int spins = 0; (generation = generation_.load(std::memory_order_acquire)) == seen;) {
      cpu_relax();
      if (++spins % 256 == 0 && std::chrono::steady_clock::now() > spin_until)
        generation_.wait(seen, std::memory_order_acquire);
    }
    seen = generation;
    if (stopping_.load(std::memory_order_relaxed)) return;
    try {
      (*job_)(index);
    } catch (...) {
      errors_[index] = std::current_exception();
    }
    pending_.fetch_sub(1, std::memory_order_release);
  }
}

ScopedTeam::ScopedTeam(ThreadTeam* team) : previous_(current_team) { current_team = team; }

ScopedTeam::~ScopedTeam() { current_team = previous_; }

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

}  // namespace dtrain
