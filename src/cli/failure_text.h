// The one line a failure that is not dtrain's own ends the process with: what std::bad_alloc and a
// thread that could not start mean on this machine, with the limits that made them happen.
#pragma once

#include <exception>
#include <string>

namespace dtrain::cli {

// e.what(), except for an allocation that failed (std::bad_alloc) or a thread the system would not
// start (std::system_error, resource_unavailable_try_again): those say what failed and what this
// process may still map (its address-space or data limit, else the machine's memory), and how to
// give it more.
std::string failure_text(const std::exception& e);

}  // namespace dtrain::cli
