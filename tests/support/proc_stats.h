// What Linux's /proc tells about a running process: its resident memory and its open file
// descriptors, for tests that watch tasks for leaks while they run.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <system_error>

namespace dtrain::testing {

// VmRSS in bytes; nullopt once the process has exited, even before it is reaped (a zombie has no
// memory left to report), or if /proc cannot be read.
inline std::optional<int64_t> resident_bytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    // "VmRSS:	    1234 kB"
    if (line.starts_with("VmRSS:")) return std::stoll(line.substr(6)) * 1024;
  }
  return std::nullopt;
}

// The entries of /proc/<pid>/fd; nullopt if they cannot be read. A process that is exiting has
// closed them all: read this before resident_bytes and keep it only if that still has a value.
inline std::optional<int> open_fds(pid_t pid) {
  std::error_code ec;
  std::filesystem::directory_iterator it("/proc/" + std::to_string(pid) + "/fd", ec);
  int count = 0;
  for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) ++count;
  if (ec) return std::nullopt;
  return count;
}

}  // namespace dtrain::testing
