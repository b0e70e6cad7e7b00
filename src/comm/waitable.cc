#include "comm/waitable.h"

#include <fmt/format.h>
#include <poll.h>

#include <array>
#include <cerrno>
#include <stdexcept>
#include <system_error>

#include "base/error.h"

namespace dtrain {

bool wait_any(std::span<const Waitable> waits, int timeout_ms) {
  std::array<pollfd, 4> entries;
  if (waits.size() > entries.size()) throw std::logic_error("wait_any: too many waitables");
  for (size_t i = 0; i < waits.size(); ++i) {
    const short events =
        static_cast<short>((waits[i].read ? POLLIN : 0) | (waits[i].write ? POLLOUT : 0));
    entries[i] = {waits[i].fd, events, 0};
  }
  const int ready = ::poll(entries.data(), waits.size(), timeout_ms);
  if (ready < 0 && errno != EINTR) {
    throw TransportError(fmt::format("poll failed: {}", std::generic_category().message(errno)));
  }
  return ready != 0;
}

}  // namespace dtrain
