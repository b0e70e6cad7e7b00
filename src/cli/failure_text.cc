// Reads the limits when the failure happens, not before: what the process maps by then is what
// left no room.
#include "cli/failure_text.h"

#include <fmt/format.h>

#include <new>
#include <system_error>

#include "base/machine_memory.h"

namespace dtrain::cli {

std::string failure_text(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) {
    return fmt::format(
        "out of memory: an allocation failed (std::bad_alloc); what is left now: {}; try a smaller "
        "model, --batch_size or data set, or a higher limit (ulimit -v, ulimit -d)",
        allocation_limit().text);
  }
  if (const auto* system = dynamic_cast<const std::system_error*>(&e);
      system != nullptr && system->code() == std::errc::resource_unavailable_try_again) {
    return fmt::format(
        "could not start a thread ({}): each thread's stack takes address space, and what is "
        "left now is {}; raise the limit (ulimit -v) or give fewer --threads (the user's thread "
        "limit, ulimit -u, stops threads too)",
        system->what(), allocation_limit().text);
  }
  return e.what();
}

}  // namespace dtrain::cli
