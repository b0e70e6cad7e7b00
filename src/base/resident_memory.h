// How much memory this process has held: what a user sizing a ps or worker pod needs to know.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace dtrain {

// The most resident memory this process has held so far (VmHWM in /proc/self/status), in bytes;
// nullopt where the kernel does not say.
std::optional<uint64_t> peak_resident_bytes();

// "41.2 MiB", or "unknown".
std::string format_peak_resident();

}  // namespace dtrain
