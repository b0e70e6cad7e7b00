// `dtrain plot RUN_DIR [RUN_DIR...]`: charts of runs' metrics.jsonl — loss, accuracy, learning
// rate and throughput against the global step or the time, the runs overlaid — as PNG and SVG
// files that gnuplot draws. The series are metrics/run_series.h's, the charts
// metrics/run_charts.h's; this file checks what it is given, and says what it wrote.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "base/error.h"
#include "cli/commands.h"
#include "cli/gnuplot.h"
#include "metrics/run_charts.h"
#include "metrics/run_series.h"

namespace dtrain::cli {
namespace {

namespace fs = std::filesystem;

struct PlotRequest {
  std::vector<std::string> runs;
  std::string output;
  std::string x = "step";
  std::string size = "800x500";
};

// Big enough to read, small enough that a PNG of it is a few megabytes at most.
constexpr int kMinChartPixels = 100;
constexpr int kMaxChartPixels = 8000;

void parse_chart_size(const std::string& text, ChartOptions& options) {
  const char* end = text.data() + text.size();
  auto [after_width, width_error] = std::from_chars(text.data(), end, options.width);
  bool ok = width_error == std::errc() && after_width != end && *after_width == 'x';
  if (ok) {
    auto [after_height, height_error] = std::from_chars(after_width + 1, end, options.height);
    ok = height_error == std::errc() && after_height == end;
  }
  if (!ok || options.width < kMinChartPixels || options.height < kMinChartPixels ||
      options.width > kMaxChartPixels || options.height > kMaxChartPixels) {
    throw UsageError(
        fmt::format("--size: '{}' is not WIDTHxHEIGHT in pixels, each from {} to {} (e.g. 800x500)",
                    chart_label(text), kMinChartPixels, kMaxChartPixels));
  }
}

ChartOptions chart_options(const PlotRequest& request) {
  ChartOptions options;
  if (request.x == "time") {
    options.x = ChartAxis::kTime;
  } else if (request.x != "step") {
    throw UsageError(fmt::format("--x: '{}' is neither step nor time", chart_label(request.x)));
  }
  parse_chart_size(request.size, options);
  return options;
}

// A run folder as the user named it, without trailing slashes.
std::string run_name(std::string name) {
  while (name.size() > 1 && name.back() == '/') name.pop_back();
  return name;
}

void refuse_repeated_runs(const std::vector<std::string>& runs) {
  std::vector<fs::path> seen;
  for (const std::string& run : runs) {
    std::error_code ec;
    const fs::path canonical = fs::weakly_canonical(run, ec);
    if (ec) continue;  // read_run names what is wrong with it
    if (std::find(seen.begin(), seen.end(), canonical) != seen.end())
      throw UsageError(fmt::format("{}: given twice", chart_label(run_name(run))));
    seen.push_back(canonical);
  }
}

// "1 record", "2 records".
std::string counted(int64_t n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

RunSeries read_run(const std::string& name, const std::vector<std::string>& scalars) {
  const std::string label = chart_label(name);
  std::error_code ec;
  const fs::file_status status = fs::status(name, ec);
  if (status.type() == fs::file_type::not_found)
    throw UsageError(fmt::format("{}: no such folder", label));
  if (ec) throw IoError(fmt::format("{}: {}", label, ec.message()));
  if (!fs::is_directory(status)) {
    throw UsageError(fmt::format(
        "{}: not a folder (dtrain plot takes the folder a run wrote, its --train_dir)", label));
  }
  const fs::path file = fs::path(name) / "metrics.jsonl";
  if (!fs::exists(fs::symlink_status(file, ec))) {
    throw UsageError(
        fmt::format("{}: no metrics.jsonl in it: dtrain writes one into a run's --train_dir (a "
                    "--logdir alone holds TensorBoard events only)",
                    label));
  }
  RunSeries series = read_run_series(file, scalars);
  if (series.records == 0) {
    throw DataError(fmt::format(
        "{}/metrics.jsonl: no records yet{}: nothing to plot", label,
        series.skipped_lines > 0
            ? fmt::format(
                  " ({}; the first, line {}: {})",
                  counted(series.skipped_lines, "line is not a record", "lines are not records"),
                  series.first_skipped_line, series.first_skipped_reason)
            : ""));
  }
  return series;
}

// What was read, and what was not: one line.
std::string describe_read(const std::string& label, const RunSeries& series) {
  std::string line = fmt::format("{}: {}", label, counted(series.records, "record", "records"));
  if (series.skipped_lines > 0) {
    line += fmt::format(
        "; skipped {} (the first, line {}: {})",
        counted(series.skipped_lines, "line that is not a record", "lines that are not records"),
        series.first_skipped_line, series.first_skipped_reason);
  }
  if (series.bad_values > 0) {
    line +=
        fmt::format("; skipped {}", counted(series.bad_values, "value that is not a finite number",
                                            "values that are not finite numbers"));
  }
  if (series.resumptions > 0) {
    line += fmt::format("; resumed {}, {} superseded", counted(series.resumptions, "time", "times"),
                        counted(series.superseded_points, "point", "points"));
  }
  for (const auto& [name, s] : series.series) {
    if (s.stride > 1) line += fmt::format("; {}: 1 point in {} drawn", name, s.stride);
  }
  return line;
}

fs::path output_folder(const PlotRequest& request) {
  if (!request.output.empty()) return request.output;
  if (request.runs.size() > 1) {
    throw UsageError(fmt::format(
        "--output: {} runs are overlaid; name the folder for their charts with --output DIR",
        request.runs.size()));
  }
  return fs::path(run_name(request.runs[0])) / "plots";
}

void make_output_folder(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir)) {
    throw UsageError(fmt::format("--output {}: not a folder that can be made or written{}",
                                 chart_label(dir.string()),
                                 ec ? fmt::format(" ({})", ec.message()) : ""));
  }
}

// A chart that no run has points for now: its files from an earlier plot would show what is no
// longer so.
void remove_stale_chart(const fs::path& dir, const std::string& chart) {
  std::vector<std::string> removed;
  for (const char* extension : {".png", ".svg"}) {
    const fs::path file = dir / (chart + extension);
    std::error_code ec;
    const fs::file_status status = fs::symlink_status(file, ec);
    if ((fs::is_regular_file(status) || fs::is_symlink(status)) && fs::remove(file, ec))
      removed.push_back(removed.empty() ? chart_label(file.string()) : extension);
  }
  if (removed.empty()) return;
  fmt::print("removed {} of an earlier plot: no run has its points now\n",
             removed.size() == 1 ? removed[0] : removed[0] + " and " + removed[1]);
}

int plot(const PlotRequest& request) {
  const ChartOptions options = chart_options(request);
  const fs::path out_dir = output_folder(request);
  refuse_repeated_runs(request.runs);
  const std::vector<std::string> scalars = chart_scalars();
  std::vector<RunSeries> series;
  series.reserve(request.runs.size());
  std::vector<ChartRun> runs;
  for (const std::string& run : request.runs) {
    const std::string name = run_name(run);
    series.push_back(read_run(name, scalars));
    runs.push_back({chart_label(name), &series.back()});
    fmt::print("{}\n", describe_read(runs.back().label, series.back()));
  }
  const ChartScript script = chart_script(runs, options);
  for (const std::string& note : script.notes) fmt::print("{}\n", note);
  if (script.charts.empty())
    throw DataError("nothing to plot: no run has a loss, accuracy, learning rate or throughput");
  const char* path = std::getenv("PATH");
  const fs::path gnuplot = find_gnuplot(path != nullptr ? path : "/usr/bin:/bin");
  make_output_folder(out_dir);
  std::vector<std::string> files;
  for (const std::string& chart : script.charts) {
    files.push_back(chart + ".png");
    files.push_back(chart + ".svg");
  }
  run_gnuplot(gnuplot, script.text, files, out_dir);
  for (const std::string& chart : chart_names()) {
    if (std::find(script.charts.begin(), script.charts.end(), chart) == script.charts.end())
      remove_stale_chart(out_dir, chart);
  }
  for (const std::string& chart : script.charts)
    fmt::print("wrote {}.png and .svg\n", chart_label((out_dir / chart).string()));
  return 0;
}

}  // namespace

void add_plot_command(CLI::App& app, Action& action) {
  auto request = std::make_shared<PlotRequest>();
  CLI::App* cmd = app.add_subcommand(
      "plot", "Draw runs' loss, accuracy, learning rate and throughput as PNG and SVG charts");
  cmd->add_option("runs", request->runs,
                  "Run folders (a run's --train_dir, holding its metrics.jsonl), overlaid")
      ->required();
  cmd->add_option("--output", request->output,
                  "The folder for the charts (default: RUN_DIR/plots for one run)");
  cmd->add_option("--x", request->x,
                  "The x axis: step (the global step, default) or time (wall-clock since the run "
                  "started)");
  cmd->add_option("--size", request->size, "Each chart's size in pixels (default 800x500)");
  cmd->callback([request, &action] { action = [request] { return plot(*request); }; });
}

}  // namespace dtrain::cli
