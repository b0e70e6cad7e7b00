// Write-to-temporary, fsync, rename, fsync-the-directory: the POSIX recipe for replacing a file
// atomically and durably (rename(2) is atomic within a filesystem; the directory fsync persists
// it).
#include "base/atomic_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/error.h"

namespace dtrain {
namespace {

// Large enough that writing a model is a few hundred big writes; small tensors (biases) are
// gathered.
constexpr size_t kBufferBytes = 4 << 20;

std::string errno_text(int err) { return std::strerror(err); }

void fsync_directory(const std::filesystem::path& file) {
  std::filesystem::path dir = file.parent_path();
  if (dir.empty()) dir = ".";
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    throw IoError(
        fmt::format("{}: cannot open directory to fsync it: {}", dir.string(), errno_text(errno)));
  }
  // Some filesystems cannot fsync a directory (EINVAL); the rename is done and nothing more can be
  // asked of them.
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0 && err != EINVAL) {
    throw IoError(fmt::format("{}: fsync of directory failed: {}", dir.string(), errno_text(err)));
  }
}

}  // namespace

std::filesystem::path atomic_temp_path(const std::filesystem::path& path, int attempt) {
  std::filesystem::path temp = path;
  temp += fmt::format(".tmp-{}-{}", ::getpid(), attempt);
  return temp;
}

bool parse_atomic_temp_name(std::string_view file_name, std::string_view* target_name, long* pid) {
  constexpr std::string_view kMarker = ".tmp-";
  const size_t pos = file_name.rfind(kMarker);
  if (pos == std::string_view::npos || pos == 0) return false;
  const std::string_view suffix = file_name.substr(pos + kMarker.size());
  const size_t dash = suffix.find('-');
  const std::string_view pid_text = suffix.substr(0, dash);
  const std::string_view attempt = dash == std::string_view::npos ? "0" : suffix.substr(dash + 1);
  auto digits = [](std::string_view text) {
    return !text.empty() && text.size() <= 18 &&
           std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (!digits(pid_text) || !digits(attempt)) return false;
  *target_name = file_name.substr(0, pos);
  *pid = std::stol(std::string(pid_text));
  return true;
}

AtomicFileWriter::AtomicFileWriter(std::filesystem::path path, mode_t mode)
    : path_(std::move(path)) {
  int error = 0;
  for (int attempt = 0; attempt < kAtomicTempAttempts; ++attempt) {
    temp_path_ = atomic_temp_path(path_, attempt);
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd_ >= 0) break;
    error = errno;
    if (error != EEXIST) break;  // only a name in use is worth another try
  }
  if (fd_ < 0) {
    throw IoError(fmt::format("{}: cannot create temporary file {}: {}", path_.string(),
                              temp_path_.string(), errno_text(error)));
  }
  buffer_.reserve(kBufferBytes);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (committed_) return;
  if (fd_ >= 0) ::close(fd_);
  // Best effort on an error path that is already throwing; the next CheckpointManager::save also
  // removes leftovers.
  ::unlink(temp_path_.c_str());
}

void AtomicFileWriter::append(std::span<const std::byte> bytes) {
  if (buffer_.size() + bytes.size() <= kBufferBytes) {
    buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
    return;
  }
  flush();
  // A large tensor goes straight from its arena to the kernel instead of through the buffer.
  if (bytes.size() >= kBufferBytes) {
    write_fully(bytes.data(), bytes.size());
  } else {
    buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
  }
}

void AtomicFileWriter::flush() {
  write_fully(buffer_.data(), buffer_.size());
  buffer_.clear();
}

void AtomicFileWriter::write_fully(const std::byte* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd_, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw IoError(fmt::format("{}: write to {} failed: {}", path_.string(), temp_path_.string(),
                                errno_text(errno)));
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
}

void AtomicFileWriter::commit() {
  flush();
  if (::fsync(fd_) != 0) {
    throw IoError(fmt::format("{}: fsync of {} failed: {}", path_.string(), temp_path_.string(),
                              errno_text(errno)));
  }
  int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) {
    throw IoError(fmt::format("{}: close of {} failed: {}", path_.string(), temp_path_.string(),
                              errno_text(errno)));
  }
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    throw IoError(fmt::format("{}: cannot rename {} over it: {}", path_.string(),
                              temp_path_.string(), errno_text(errno)));
  }
  committed_ = true;
  fsync_directory(path_);
}

}  // namespace dtrain
