// The event reader from C++ tests.
#include "support/tb_events.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace dtrain::testing {
namespace {

const std::string kReader =
    std::string(DTRAIN_SOURCE_DIR) + "/tests/metrics/tensorboard/tb_events.py";

// A Python 3 with the protobuf and crcmod modules: python3 on PATH, else the system's.
std::string reader_python() {
  for (const char* python : {"python3", "/usr/bin/python3"}) {
    try {
      if (run_command({python, "-c", "import google.protobuf, crcmod"}).exit_code == 0)
        return python;
    } catch (const std::exception&) {
      // Not installed there; try the next.
    }
  }
  ADD_FAILURE() << "the event reader needs python3 with the protobuf and crcmod modules (Debian "
                   "packages python3-protobuf, python3-crcmod; scripts/setup.sh installs them)";
  return "python3";
}

}  // namespace

ProcessResult run_event_reader(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {reader_python(), kReader};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(argv);
}

nlohmann::json dump_events(const std::filesystem::path& path) {
  const ProcessResult r = run_event_reader({"dump", path.string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? nlohmann::json::parse(r.out)
                          : nlohmann::json{{"files", nlohmann::json::array()}};
}

std::vector<std::filesystem::path> event_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().filename().string().starts_with("events.out.tfevents."))
      files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<EventValue> values_of(const nlohmann::json& file) {
  std::vector<EventValue> values;
  for (const nlohmann::json& event : file["events"]) {
    if (!event.contains("summary")) continue;
    for (const nlohmann::json& value : event["summary"])
      values.push_back({event["step"].get<int64_t>(), value});
  }
  return values;
}

std::vector<std::pair<int64_t, double>> scalars_of(const nlohmann::json& file,
                                                   const std::string& tag) {
  std::vector<std::pair<int64_t, double>> points;
  for (const EventValue& v : values_of(file)) {
    if (v.value["tag"] == tag && v.value["kind"] == "scalar")
      points.emplace_back(v.step, v.value["value"].get<double>());
  }
  return points;
}

std::optional<EventValue> last_histogram(const nlohmann::json& file, const std::string& tag) {
  std::optional<EventValue> last;
  for (const EventValue& v : values_of(file)) {
    if (v.value["tag"] == tag && v.value["kind"] == "histogram") last = v;
  }
  return last;
}

void expect_clean_events(const nlohmann::json& file) {
  EXPECT_EQ(file["bad_records"].size(), 0u) << file["path"] << ": " << file["bad_records"];
  EXPECT_TRUE(file["truncated_tail"].is_null()) << file["path"];
  EXPECT_TRUE(file["first_record_is_file_version"].get<bool>()) << file["path"];
  EXPECT_EQ(file["file_version"], "brain.Event:2");
}

}  // namespace dtrain::testing
