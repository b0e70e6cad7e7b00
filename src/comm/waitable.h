// What a thread that drives several links at once sleeps on: each link's descriptor (a socket, or
// the eventfd of a link that has none), for reading, writing or both, and any other descriptor
// that may wake it (an interrupt's eventfd). Callers ask a connection for its waitable
// (comm/connection.h) rather than for its socket, so the same wait serves every link.
#pragma once

#include <span>

namespace dtrain {

struct Waitable {
  int fd = -1;
  bool read = false;   // bytes (or an error, or a peer's close) to read
  bool write = false;  // room to write
};

// Waits until any of `waits` (at most 4) is ready, or until timeout_ms has passed (then returns
// false; EINTR counts as a wake-up, so the caller tries again and waits anew). Throws
// TransportError if poll fails, std::logic_error for more than 4.
bool wait_any(std::span<const Waitable> waits, int timeout_ms);

inline bool wait_for(const Waitable& wait, int timeout_ms) {
  return wait_any(std::span(&wait, 1), timeout_ms);
}

}  // namespace dtrain
