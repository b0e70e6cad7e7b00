#include "base/machine_memory.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <fstream>

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

}  // namespace

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
