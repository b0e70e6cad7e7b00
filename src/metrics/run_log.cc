// The run log and its JSON-lines sink.
#include "metrics/run_log.h"

#include <nlohmann/json.hpp>

namespace dtrain {

void JsonLinesSink::write(const RunRecord& record) {
  if (record.scalars.empty()) return;
  nlohmann::json line = {{"step", record.step}};
  for (const auto& [name, value] : record.scalars) line[name] = value;
  if (record.final) line["final"] = true;
  log_.write(line);
}

void RunLog::write(const RunRecord& record) {
  for (const auto& sink : sinks_) sink->write(record);
}

void RunLog::close() {
  for (const auto& sink : sinks_) sink->close();
  sinks_.clear();
}

}  // namespace dtrain
