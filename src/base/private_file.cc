// O_NOFOLLOW refuses a link at the last component only: the folders above are the user's choice,
// and a run writes wherever they lead. What this guards against is a name in that folder that
// another user could plant before the run opens it.
#include "base/private_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace dtrain {
namespace {

constexpr std::string_view kHint =
    "dtrain does not write through a name it did not create; give the run a folder only you can "
    "write to";

// Throws UsageError naming path when fd is not a regular file of this process's user.
void check_own_regular_file(int fd, const std::filesystem::path& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    throw IoError(fmt::format("{}: cannot stat: {}", path.string(), std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    throw UsageError(fmt::format("{}: is not a regular file; {}", path.string(), kHint));
  }
  if (st.st_uid != ::geteuid()) {
    throw UsageError(fmt::format("{}: belongs to uid {}, not to this user (uid {}); {}",
                                 path.string(), st.st_uid, ::geteuid(), kHint));
  }
}

}  // namespace

int create_private_file(const std::filesystem::path& path) {
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, kPrivateFileMode);
  if (fd >= 0) return fd;
  const int error = errno;
  if (error == EEXIST) {
    throw UsageError(
        fmt::format("{}: already exists (a file or a link); {}", path.string(), kHint));
  }
  throw IoError(fmt::format("{}: cannot create: {}", path.string(), std::strerror(error)));
}

int open_private_file_for_append(const std::filesystem::path& path) {
  // O_NONBLOCK: a FIFO planted at the name would otherwise hold the open until someone reads it;
  // the check below refuses it, and for a regular file the flag changes nothing.
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
             kPrivateFileMode);
  if (fd < 0) {
    const int error = errno;
    // ELOOP is how O_NOFOLLOW reports a link at the name.
    if (error == ELOOP) {
      throw UsageError(fmt::format("{}: is a symbolic link; {}", path.string(), kHint));
    }
    throw IoError(
        fmt::format("{}: cannot open for appending: {}", path.string(), std::strerror(error)));
  }
  try {
    check_own_regular_file(fd, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  return fd;
}

}  // namespace dtrain
