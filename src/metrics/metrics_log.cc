// JSON-lines metrics file.
#include "metrics/metrics_log.h"

#include <fmt/format.h>

#include "base/error.h"

namespace dtrain {

MetricsLog::MetricsLog(const std::filesystem::path& path) {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  out_.open(path, std::ios::app);
  if (!out_)
    throw IoError(fmt::format("{}: cannot open the metrics file for appending", path.string()));
}

void MetricsLog::write(const nlohmann::json& record) {
  if (!out_.is_open()) return;
  out_ << record.dump() << '\n';
  out_.flush();
}

}  // namespace dtrain
