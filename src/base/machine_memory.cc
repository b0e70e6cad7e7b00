#include "base/machine_memory.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <optional>

#include "base/resident_memory.h"

namespace dtrain {
namespace {

uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return UINT64_MAX;  // unknown: leave the bound to the cgroup
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
}

// "max" (no limit), a missing file (cgroup v1, or none) or anything unreadable: no bound.
uint64_t cgroup_memory_limit_bytes() {
  std::ifstream in("/sys/fs/cgroup/memory.max");
  uint64_t limit = 0;
  if (in >> limit && limit > 0) return limit;
  return UINT64_MAX;
}

// What `resource` leaves this process beyond `used` (the mappings it counts), with the text a
// refusal states; nullopt where the limit is unlimited or the kernel does not say what is used.
std::optional<AllocationLimit> rlimit_headroom(int resource, std::string_view field,
                                               const char* kind, const char* names) {
  rlimit limit{};
  if (::getrlimit(resource, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return std::nullopt;
  const std::optional<uint64_t> used = process_status_bytes(field);
  if (!used) return std::nullopt;
  const uint64_t cap = limit.rlim_cur;
  const uint64_t left = cap > *used ? cap - *used : 0;
  return AllocationLimit{.bytes = left,
                         .text = fmt::format("the {} this process may still map under its {} "
                                             "limit of {} ({})",
                                             format_bytes(left), kind, format_bytes(cap), names)};
}

}  // namespace

AllocationLimit machine_allocation_limit(uint64_t bytes) {
  return {.bytes = bytes,
          .text = fmt::format("the {} of memory this machine has", format_bytes(bytes))};
}

AllocationLimit allocation_limit() {
  AllocationLimit tightest = machine_allocation_limit(machine_memory_bytes());
  for (const auto& headroom :
       {rlimit_headroom(RLIMIT_AS, "VmSize", "address-space", "RLIMIT_AS, ulimit -v"),
        rlimit_headroom(RLIMIT_DATA, "VmData", "data", "RLIMIT_DATA, ulimit -d")}) {
    if (headroom && headroom->bytes < tightest.bytes) tightest = *headroom;
  }
  return tightest;
}

uint64_t machine_memory_bytes() {
  static const uint64_t bytes = std::min(physical_memory_bytes(), cgroup_memory_limit_bytes());
  return bytes;
}

std::string format_bytes(uint64_t bytes) {
  static constexpr std::array<const char*, 5> kUnits = {"MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < (uint64_t{1} << 20)) return fmt::format("{} bytes", bytes);
  double value = static_cast<double>(bytes) / (1 << 20);
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < kUnits.size()) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.1f} {}", value, kUnits[unit]);
}

}  // namespace dtrain
