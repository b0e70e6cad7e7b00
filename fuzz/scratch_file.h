// One scratch file per fuzzing process, for targets whose entry point reads a path: each input is
// written over it and the reader opens it like any other file. It lives in $TMPDIR if set, else in
// /dev/shm (memory: rewriting a file on disk thousands of times a second costs most of a run),
// else in /tmp, named after the process, and is removed when the process exits normally.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

namespace dtrain::fuzzing {

class ScratchFile {
 public:
  explicit ScratchFile(std::string_view name)
      : path_(directory() / (std::string(name) + "." + std::to_string(::getpid()))) {}
  ~ScratchFile() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  // Replaces the file's contents with the input; a failure here is the harness's, so it aborts.
  const std::filesystem::path& write(const uint8_t* data, size_t size) const {
    std::FILE* file = std::fopen(path_.c_str(), "wb");
    if (file == nullptr || std::fwrite(data, 1, size, file) != size || std::fclose(file) != 0) {
      std::perror(path_.c_str());
      std::abort();
    }
    return path_;
  }

 private:
  static std::filesystem::path directory() {
    std::error_code ec;
    if (std::getenv("TMPDIR") == nullptr && std::filesystem::is_directory("/dev/shm", ec)) {
      return "/dev/shm";
    }
    return std::filesystem::temp_directory_path();
  }

  std::filesystem::path path_;
};

}  // namespace dtrain::fuzzing
