// metrics.jsonl: one JSON object per line (step, seconds of training so far, loss, accuracy, ...),
// so time-to-accuracy and learning curves can be read off with any tool. Each line is flushed as
// written.
#pragma once

#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

namespace dtrain {

class MetricsLog {
 public:
  MetricsLog() = default;  // disabled: write() does nothing
  // Appends to path (creating its folder, and the file with kPrivateFileMode from
  // base/private_file.h), so that a resumed run goes on with the same file. Throws UsageError
  // naming the path if it is a link, not a regular file or another user's; IoError if it cannot be
  // opened.
  explicit MetricsLog(const std::filesystem::path& path);

  bool enabled() const { return out_ != nullptr; }
  // Throws IoError naming the file when the line cannot be written.
  void write(const nlohmann::json& record);

 private:
  struct Close {
    void operator()(std::FILE* file) const { std::fclose(file); }
  };
  std::filesystem::path path_;
  std::unique_ptr<std::FILE, Close> out_;
};

}  // namespace dtrain
