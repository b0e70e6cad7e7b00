// JSON-lines metrics file.
#include "metrics/metrics_log.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"
#include "base/private_file.h"

namespace dtrain {

MetricsLog::MetricsLog(const std::filesystem::path& path) : path_(path) {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  // Opened for appending across resumptions, so not exclusively: the link and owner checks are
  // what keep a name planted in the folder from being written through.
  const int fd = open_private_file_for_append(path);
  out_.reset(::fdopen(fd, "a"));
  if (out_ == nullptr) {
    const int error = errno;
    ::close(fd);
    throw IoError(fmt::format("{}: cannot open the metrics file for appending: {}", path.string(),
                              std::strerror(error)));
  }
}

void MetricsLog::write(const nlohmann::json& record) {
  if (out_ == nullptr) return;
  const std::string line = record.dump() + '\n';
  if (std::fwrite(line.data(), 1, line.size(), out_.get()) != line.size() ||
      std::fflush(out_.get()) != 0) {
    throw IoError(
        fmt::format("{}: cannot write the metrics file: {}", path_.string(), std::strerror(errno)));
  }
}

}  // namespace dtrain
