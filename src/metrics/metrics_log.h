// metrics.jsonl: one JSON object per line (step, seconds of training so far, loss, accuracy, ...),
// so time-to-accuracy and learning curves can be read off with any tool. Each line is flushed as
// written.
#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace dtrain {

class MetricsLog {
 public:
  MetricsLog() = default;  // disabled: write() does nothing
  // Appends to path (creating its folder); throws IoError naming the path if it cannot be opened.
  explicit MetricsLog(const std::filesystem::path& path);

  bool enabled() const { return out_.is_open(); }
  void write(const nlohmann::json& record);

 private:
  std::ofstream out_;
};

}  // namespace dtrain
