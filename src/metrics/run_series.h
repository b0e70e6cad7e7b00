// A run's metrics.jsonl (the JSON-lines sink's format, metrics/run_log.h) read back as the series
// a chart draws: for each scalar asked for, its points in step order. What the reader keeps:
// - one point per step, the first record's value at that step (as TensorBoard keeps one);
// - a start line that resumed from a checkpoint at step S drops what the interrupted run logged
//   after S; one that started afresh drops everything logged after its step and restarts the clock;
// - a line that is not a record (not JSON, not an object with a whole "step" >= 0, longer than
//   max_line_bytes, cut short) is skipped and counted, and so is a value that is not a finite
//   number (metrics.jsonl holds NaN and Inf as null);
// - past max_points points a series keeps every second one, and so on, so a file of any length
//   is read in bounded memory; `stride` says how many points each kept one stands for.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace dtrain {

struct SeriesPoint {
  int64_t step = 0;
  // Wall-clock seconds since the run started (its first start line, else its first record that
  // has a time); NaN for a line without "wall_time" (written before dtrain recorded them).
  double seconds = 0;
  double value = 0;
};

struct Series {
  std::vector<SeriesPoint> points;  // in step order
  int64_t stride = 1;               // every stride-th point of the file kept
};

struct RunSeries {
  std::map<std::string, Series, std::less<>> series;  // by scalar name; only those with points
  int64_t records = 0;                                // lines read as records
  int64_t skipped_lines = 0;                          // lines that are not records
  int64_t first_skipped_line = 0;                     // its line number, counted from 1
  std::string first_skipped_reason;                   // why it is not a record
  int64_t bad_values = 0;                             // values that are not finite numbers
  int64_t superseded_points = 0;                      // dropped by a later start line
  int64_t resumptions = 0;                            // start lines that resumed
};

struct SeriesLimits {
  int64_t max_points = 20000;         // per series; a chart is a few hundred pixels wide
  size_t max_line_bytes = 64 * 1024;  // a record is a few hundred bytes
};

// Reads the series named in `scalars` from a metrics.jsonl file. Throws UsageError naming path
// when it is missing or not a regular file (a FIFO is refused, not waited on), IoError when it
// cannot be read.
RunSeries read_run_series(const std::filesystem::path& path, std::span<const std::string> scalars,
                          const SeriesLimits& limits = {});

}  // namespace dtrain
