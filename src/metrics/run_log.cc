// The run log and its JSON-lines sink.
#include "metrics/run_log.h"

#include <chrono>
#include <nlohmann/json.hpp>

namespace dtrain {

double wall_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void JsonLinesSink::write(const RunRecord& record) {
  if (record.scalars.empty() && !record.start) return;
  nlohmann::json line = {{"step", record.step}};
  if (record.start) line["start"] = true;
  if (record.start && record.resumed) line["resumed"] = true;
  for (const auto& [name, value] : record.scalars) line[name] = value;
  if (record.final) line["final"] = true;
  line["wall_time"] = wall_time_now();
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
