// Reading TensorBoard event files in tests through tests/metrics/tensorboard/tb_events.py, the
// independent reader (Python's protobuf runtime, crcmod's CRC-32C, no dtrain code).
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "support/process.h"

namespace dtrain::testing {

// Runs the reader with these arguments (dump, check, scalars ...).
ProcessResult run_event_reader(const std::vector<std::string>& args);
// `dump PATH`: {"files": [{"path", "records", "bad_records", "truncated_tail", "events", ...}]};
// a failure of the reader fails the test.
nlohmann::json dump_events(const std::filesystem::path& path);
// The events.out.tfevents.* files directly in dir, by name (so by time).
std::vector<std::filesystem::path> event_files(const std::filesystem::path& dir);

// One summary value of a decoded file, with its event's step.
struct EventValue {
  int64_t step;
  nlohmann::json value;
};
std::vector<EventValue> values_of(const nlohmann::json& file);
// (step, value) of every scalar of this tag, in file order.
std::vector<std::pair<int64_t, double>> scalars_of(const nlohmann::json& file,
                                                   const std::string& tag);
std::optional<EventValue> last_histogram(const nlohmann::json& file, const std::string& tag);

// No bad record, no cut tail, and the file version first.
void expect_clean_events(const nlohmann::json& file);

}  // namespace dtrain::testing
