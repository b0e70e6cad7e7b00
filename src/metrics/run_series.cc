// Reading metrics.jsonl back: one pass over the lines, each parsed on its own, so a damaged line
// costs that line alone.
#include "metrics/run_series.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/error.h"
#include "base/json_depth.h"

namespace dtrain {
namespace {

constexpr double kNoTime = std::numeric_limits<double>::quiet_NaN();

struct FileCloser {
  void operator()(std::FILE* file) const { std::fclose(file); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

// Opened without blocking and checked to be a regular file before anything is read: a FIFO put at
// the name would otherwise hang the reader, a device feed it forever.
File open_regular_file(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    if (error == ENOENT) throw UsageError(fmt::format("{}: no such file", path.string()));
    throw IoError(fmt::format("{}: cannot open: {}", path.string(), std::strerror(error)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw UsageError(fmt::format("{}: not a regular file", path.string()));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  File file(::fdopen(fd, "r"));
  if (file == nullptr) {
    ::close(fd);
    throw IoError(fmt::format("{}: cannot open: {}", path.string(), std::strerror(errno)));
  }
  return file;
}

// A key that is there and true; anything else (absent, another type) is false.
bool flag(const nlohmann::json& record, const char* key) {
  const auto it = record.find(key);
  return it != record.end() && it->is_boolean() && it->get<bool>();
}

// The next line, without its '\n', of at most max_bytes (the rest is read and dropped, and
// *too_long set); false at the end of the file.
bool next_line(std::FILE* file, std::string& line, size_t max_bytes, bool* too_long) {
  line.clear();
  *too_long = false;
  bool any = false;
  for (int c; (c = getc_unlocked(file)) != EOF;) {
    any = true;
    if (c == '\n') return true;
    if (line.size() < max_bytes) {
      line.push_back(static_cast<char>(c));
    } else {
      *too_long = true;
    }
  }
  return any;
}

// One series as it is read: thinned past the limit, superseded by later start lines.
class SeriesBuilder {
 public:
  void add(const SeriesPoint& point, int64_t max_points) {
    // The first value at a step is the one kept; a record behind the series' last step is older.
    if (!series_.points.empty() && point.step <= series_.points.back().step) return;
    if (point.step <= last_dropped_step_) return;
    if (seen_++ % series_.stride != 0) {
      last_dropped_step_ = point.step;
      return;
    }
    series_.points.push_back(point);
    if (static_cast<int64_t>(series_.points.size()) < max_points) return;
    // Every second point, from the first: what a stride twice as long would have kept.
    size_t kept = 0;
    for (size_t i = 0; i < series_.points.size(); i += 2)
      series_.points[kept++] = series_.points[i];
    series_.points.resize(kept);
    series_.stride *= 2;
  }

  // Drops the points after `step`; returns how many.
  int64_t drop_after(int64_t step) {
    std::vector<SeriesPoint>& points = series_.points;
    int64_t dropped = 0;
    while (!points.empty() && points.back().step > step) {
      points.pop_back();
      ++dropped;
    }
    last_dropped_step_ = std::min(last_dropped_step_, step);
    seen_ = static_cast<int64_t>(points.size()) * series_.stride;
    return dropped;
  }

  Series take() { return std::move(series_); }

 private:
  Series series_;
  int64_t seen_ = 0;  // points of the file so far, kept or not
  // A thinned-out point's step: a later record at that step is not a new point either.
  int64_t last_dropped_step_ = -1;
};

class Reader {
 public:
  Reader(std::span<const std::string> scalars, const SeriesLimits& limits) : limits_(limits) {
    for (const std::string& name : scalars) builders_.try_emplace(name);
  }

  void read_line(const std::string& line, bool too_long, int64_t number) {
    std::string_view why;
    nlohmann::json record;
    if (too_long) {
      why = "longer than a record can be";
    } else if (find_json_nesting_beyond(line, kMaxJsonNesting)) {
      why = "nested deeper than a record";
    } else {
      record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (record.is_discarded()) {
        why = "not JSON";
      } else if (!record.is_object()) {
        why = "not a JSON object";
      } else if (!record.contains("step") || !record["step"].is_number_integer() ||
                 record["step"].get<int64_t>() < 0) {
        why = "no whole \"step\" of 0 or more";
      }
    }
    if (!why.empty()) {
      if (result_.skipped_lines++ == 0) {
        result_.first_skipped_line = number;
        result_.first_skipped_reason = why;
      }
      return;
    }
    ++result_.records;
    read_record(record);
  }

  RunSeries finish() {
    for (auto& [name, builder] : builders_) {
      Series series = builder.take();
      if (!series.points.empty()) result_.series.emplace(name, std::move(series));
    }
    return std::move(result_);
  }

 private:
  void read_record(const nlohmann::json& record) {
    const int64_t step = record["step"].get<int64_t>();
    std::optional<double> wall_time;
    if (auto it = record.find("wall_time"); it != record.end() && it->is_number()) {
      if (const double t = it->get<double>(); std::isfinite(t)) wall_time = t;
    }
    if (flag(record, "start")) start(step, flag(record, "resumed"), wall_time);
    if (wall_time && std::isnan(origin_)) origin_ = *wall_time;
    const double seconds = wall_time ? *wall_time - origin_ : kNoTime;
    for (auto& [name, builder] : builders_) {
      const auto it = record.find(name);
      if (it == record.end()) continue;
      if (!it->is_number() || !std::isfinite(it->get<double>())) {
        ++result_.bad_values;
        continue;
      }
      builder.add({step, seconds, it->get<double>()}, limits_.max_points);
    }
  }

  // What the interrupted run logged after the checkpoint goes; a fresh start restarts the clock.
  void start(int64_t step, bool resumed, std::optional<double> wall_time) {
    for (auto& [name, builder] : builders_) result_.superseded_points += builder.drop_after(step);
    if (resumed) {
      ++result_.resumptions;
    } else if (wall_time) {
      origin_ = *wall_time;
    }
  }

  const SeriesLimits limits_;
  std::map<std::string, SeriesBuilder, std::less<>> builders_;
  RunSeries result_;
  double origin_ = kNoTime;  // the wall time the run's clock counts from
};

}  // namespace

RunSeries read_run_series(const std::filesystem::path& path, std::span<const std::string> scalars,
                          const SeriesLimits& limits) {
  const File file = open_regular_file(path);
  Reader reader(scalars, limits);
  std::string line;
  bool too_long = false;
  for (int64_t number = 1; next_line(file.get(), line, limits.max_line_bytes, &too_long); ++number)
    reader.read_line(line, too_long, number);
  if (std::ferror(file.get()))
    throw IoError(fmt::format("{}: cannot read: {}", path.string(), std::strerror(errno)));
  return reader.finish();
}

}  // namespace dtrain
