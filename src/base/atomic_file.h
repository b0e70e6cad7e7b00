// AtomicFileWriter: replaces a file so that a reader, or the machine after a crash, sees either the
// old contents or the complete new ones, never a mix. Used for checkpoints, the checkpoint
// index and the TFRecord files dtrain convert writes.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/private_file.h"

namespace dtrain {

// Bytes go to a temporary file "<path>.tmp-<pid>-<k>" through a large buffer; commit() flushes,
// fsyncs and closes that file, renames it over path and fsyncs the directory so the rename itself
// survives a crash. The temporary file is created exclusively (O_EXCL, O_NOFOLLOW): a name that
// exists — another writer's, a crashed one's, a planted symlink — is never opened, and the next k
// is tried. A writer destroyed without commit() (an exception on the way) removes its own
// temporary file and leaves path untouched. Every failure throws IoError naming the file. One
// writer is not thread-safe; writers of the same path, in one process or several, never share a
// temporary file. The file gets `mode` (less the umask): kPrivateFileMode, unless what is written
// is meant to be handed on (base/private_file.h says which is which).
class AtomicFileWriter {
 public:
  // Creates the temporary file (its directory must exist).
  explicit AtomicFileWriter(std::filesystem::path path, mode_t mode = kPrivateFileMode);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void append(std::span<const std::byte> bytes);
  void append(std::string_view text) { append(std::as_bytes(std::span(text.data(), text.size()))); }
  // REQUIRES: not yet committed.
  void commit();

  const std::filesystem::path& temp_path() const { return temp_path_; }

 private:
  void flush();
  void write_fully(const std::byte* data, size_t size);

  std::filesystem::path path_;
  std::filesystem::path temp_path_;
  int fd_ = -1;
  bool committed_ = false;
  std::vector<std::byte> buffer_;
};

// How many temporary names a writer tries before it gives up.
inline constexpr int kAtomicTempAttempts = 16;
// "<path>.tmp-<pid>-<attempt>": this process's temporary name for path at that attempt.
std::filesystem::path atomic_temp_path(const std::filesystem::path& path, int attempt);
// Whether file_name looks like "<target_name>.tmp-<pid>" or "<target_name>.tmp-<pid>-<k>"; if so,
// sets *target_name and *pid.
bool parse_atomic_temp_name(std::string_view file_name, std::string_view* target_name, long* pid);

}  // namespace dtrain
