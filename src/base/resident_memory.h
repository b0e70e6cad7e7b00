// How much memory this process has held and maps: what a user sizing a ps or worker pod needs to
// know, and what its limits (base/machine_memory.h) leave it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dtrain {

// A size field of /proc/self/status ("VmHWM", "VmSize", "VmData"), in bytes; nullopt where the
// kernel does not say.
std::optional<uint64_t> process_status_bytes(std::string_view field);

// The most resident memory this process has held so far (VmHWM), in bytes; nullopt where the
// kernel does not say.
std::optional<uint64_t> peak_resident_bytes();

// "41.2 MiB", or "unknown".
std::string format_peak_resident();

}  // namespace dtrain
