// RingInterrupt over an eventfd, so that a ring asleep in poll() wakes when it is raised.
#include "collective/ring_interrupt.h"

#include <fmt/format.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace dtrain {

RingInterrupt::RingInterrupt() : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (fd_ < 0) {
    throw TransportError(fmt::format("ring interrupt: eventfd: {}", std::strerror(errno)));
  }
}

RingInterrupt::~RingInterrupt() { ::close(fd_); }

void RingInterrupt::raise(uint64_t view, const std::string& why) {
  {
    std::lock_guard lock(mutex_);
    if (view <= raised_.load(std::memory_order_relaxed)) return;
    why_ = why;
    raised_.store(view, std::memory_order_release);
  }
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t written = ::write(fd_, &one, sizeof one);  // never blocks
}

std::string RingInterrupt::why() const {
  std::lock_guard lock(mutex_);
  return why_;
}

void RingInterrupt::rearm() {
  uint64_t count = 0;
  [[maybe_unused]] const ssize_t read = ::read(fd_, &count, sizeof count);  // EAGAIN: not raised
}

}  // namespace dtrain
