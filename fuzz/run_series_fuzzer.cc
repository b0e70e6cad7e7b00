// libFuzzer target for reading metrics.jsonl back (metrics/run_series.h) and the chart script made
// from what was read (metrics/run_charts.h): the input is written to a scratch file and read with
// small limits, so that thinning and the line limit are reached. UsageError is the expected
// rejection (none for a regular file); any other exception, a sanitizer report, or a series that
// breaks the reader's promises (steps increasing, finite values, at most max_points points) is a
// finding, and so is a script with a line that is not the writer's own.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/error.h"
#include "metrics/run_charts.h"
#include "metrics/run_series.h"
#include "scratch_file.h"

namespace {

void require(bool holds, const char* property) {
  if (holds) return;
  std::fprintf(stderr, "run_series_fuzzer: breaks: %s\n", property);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const dtrain::fuzzing::ScratchFile scratch("dtrain_run_series_fuzzer");
  static const std::vector<std::string> scalars = dtrain::chart_scalars();
  const dtrain::SeriesLimits limits{.max_points = 8, .max_line_bytes = 256};
  dtrain::RunSeries series;
  try {
    series = dtrain::read_run_series(scratch.write(data, size), scalars, limits);
  } catch (const dtrain::UsageError&) {
    return 0;
  }
  for (const auto& [name, s] : series.series) {
    require(!s.points.empty(), "a series has points");
    require(static_cast<int64_t>(s.points.size()) < limits.max_points, "at most max_points");
    require(s.stride >= 1 && (s.stride & (s.stride - 1)) == 0, "a stride is a power of two");
    for (size_t i = 0; i < s.points.size(); ++i) {
      require(s.points[i].step >= 0, "steps are not negative");
      require(i == 0 || s.points[i].step > s.points[i - 1].step, "steps increase");
      require(std::isfinite(s.points[i].value), "values are finite");
    }
  }
  // The label comes from the input too: nothing in it may add a line to the script.
  const std::string label(reinterpret_cast<const char*>(data), size < 80 ? size : 80);
  for (const dtrain::ChartAxis x : {dtrain::ChartAxis::kStep, dtrain::ChartAxis::kTime}) {
    const std::vector<dtrain::ChartRun> runs = {{dtrain::chart_label(label), &series}};
    const std::string text = dtrain::chart_script(runs, {.x = x}).text;
    for (size_t start = 0; start < text.size();) {
      const size_t end = text.find('\n', start);
      require(end != std::string::npos, "the script ends with a newline");
      const std::string_view line(text.data() + start, end - start);
      require(line.find('\r') == std::string_view::npos, "no carriage return in the script");
      start = end + 1;
    }
  }
  return 0;
}
