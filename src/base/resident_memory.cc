#include "base/resident_memory.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

namespace dtrain {

std::optional<uint64_t> process_status_bytes(std::string_view field) {
  const std::string prefix = std::string(field) + ":";
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    std::istringstream fields(line.substr(prefix.size()));
    uint64_t kib = 0;
    std::string unit;
    if (fields >> kib >> unit && unit == "kB") return kib * 1024;
    return std::nullopt;
  }
  return std::nullopt;
}

std::optional<uint64_t> peak_resident_bytes() { return process_status_bytes("VmHWM"); }

std::string format_peak_resident() {
  const std::optional<uint64_t> bytes = peak_resident_bytes();
  if (!bytes) return "unknown";
  return fmt::format("{:.1f} MiB", static_cast<double>(*bytes) / (1 << 20));
}

}  // namespace dtrain
