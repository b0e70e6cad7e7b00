// The charts as a table, and the script that draws them: the data travel inside it as gnuplot
// datablocks, so gnuplot reads no file but the script and writes no path but a chart's own name.
#include "metrics/run_charts.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace dtrain {
namespace {

// One series of a chart: a scalar of metrics.jsonl, and what it is to the run ("" for the
// chart's own quantity, "validation", "test").
struct ChartLine {
  const char* scalar;
  const char* role;
};

struct ChartSpec {
  const char* name;  // the files' stem
  const char* title;
  const char* y_label;
  std::vector<ChartLine> lines;
  const char* lacking;  // what a run without any of these points lacks, and where it comes from
};

const std::vector<ChartSpec>& chart_specs() {
  static const std::vector<ChartSpec> specs = {
      {"loss",
       "loss",
       "loss (training batch; validation set)",
       {{"loss", ""}, {"validation/loss", "validation"}},
       "no loss yet (every step line records it: --log_every)"},
      {"accuracy",
       "accuracy",
       "accuracy",
       {{"validation/accuracy", "validation"}, {"test_accuracy", "test"}},
       "no accuracy yet (the validation accuracy comes with --eval_every or --target_accuracy, "
       "the test accuracy at the run's end)"},
      {"learning_rate",
       "learning rate",
       "learning rate",
       {{"learning_rate", ""}},
       "no learning rate yet (every step line records it: --log_every)"},
      {"throughput",
       "throughput",
       "examples/sec (the chief's own)",
       {{"examples_per_sec", ""}},
       "no throughput yet (every step line records it: --log_every)"},
  };
  return specs;
}

// The valid UTF-8 sequence at text[i] that is not a control character: its length (0 when there
// is none) and its code point.
struct Utf8Char {
  size_t length = 0;
  uint32_t code = 0;
};

Utf8Char printable_utf8_at(std::string_view text, size_t i) {
  const auto lead = static_cast<unsigned char>(text[i]);
  if (lead < 0x80) return {lead >= 0x20 && lead != 0x7F ? size_t{1} : 0, lead};
  size_t length = 0;
  uint32_t code = 0;
  if ((lead & 0xE0) == 0xC0) {
    length = 2, code = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, code = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, code = lead & 0x07;
  } else {
    return {};
  }
  if (i + length > text.size()) return {};
  for (size_t k = 1; k < length; ++k) {
    const auto next = static_cast<unsigned char>(text[i + k]);
    if ((next & 0xC0) != 0x80) return {};
    code = code << 6 | (next & 0x3F);
  }
  constexpr uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};  // shorter is an overlong form
  if (code < kSmallest[length] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return {};
  if (code <= 0x9F) return {};  // C1 controls
  return {length, code};
}

// Whether gnuplot's PNG can draw the character: DejaVu Sans (what Debian's fontconfig gives it) has
// Latin, Greek, Cyrillic and the general punctuation ("…"). A character no installed font has is
// not left out: fontconfig falls back to the last font it has (Debian's glyphicons, say), whose
// glyph covers the whole chart.
bool drawable(uint32_t code) {
  return code < 0x0530 || (code >= 0x1E00 && code < 0x2070) || (code >= 0x20A0 && code < 0x20D0);
}

// text with what is not printable UTF-8 (and, for a chart, not drawable) as C escapes.
std::string escaped(std::string_view text, bool for_chart) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const Utf8Char c = printable_utf8_at(text, i);
    if (c.length > 0 && (!for_chart || drawable(c.code))) {
      out.append(text.substr(i, c.length));
      i += c.length;
      continue;
    }
    if (c.length > 0) {
      out += c.code <= 0xFFFF ? fmt::format("\\u{:04x}", c.code) : fmt::format("\\U{:08x}", c.code);
      i += c.length;
      continue;
    }
    const auto byte = static_cast<unsigned char>(text[i++]);
    if (byte == '\n') {
      out += "\\n";
    } else if (byte == '\t') {
      out += "\\t";
    } else {
      out += fmt::format("\\x{:02x}", byte);
    }
  }
  return out;
}

constexpr size_t kMaxLabelBytes = 64;

// The x of a point: its step, or its time in `seconds_per_unit`; NaN where it has no time.
double x_of(const SeriesPoint& point, ChartAxis axis, double seconds_per_unit) {
  return axis == ChartAxis::kStep ? static_cast<double>(point.step)
                                  : point.seconds / seconds_per_unit;
}

struct TimeUnit {
  double seconds;
  const char* name;
};

// Minutes or hours once seconds grow long enough to be hard to read.
TimeUnit time_unit(std::span<const ChartRun> runs) {
  double longest = 0;
  for (const ChartRun& run : runs) {
    for (const auto& [name, series] : run.series->series) {
      for (const SeriesPoint& point : series.points)
        if (std::isfinite(point.seconds)) longest = std::max(longest, point.seconds);
    }
  }
  if (longest > 2 * 3600) return {3600, "hours"};
  if (longest > 5 * 60) return {60, "minutes"};
  return {1, "seconds"};
}

// Whether a run's charted points all lack a time: a metrics.jsonl from before dtrain wrote them.
bool has_no_times(const RunSeries& series) {
  bool any = false;
  for (const auto& [name, s] : series.series) {
    for (const SeriesPoint& point : s.points) {
      if (std::isfinite(point.seconds)) return false;
      any = true;
    }
  }
  return any;
}

std::string line_style(const ChartLine& line, size_t points, size_t colour) {
  const std::string_view role = line.role;
  if (role == "test") return fmt::format("with points pt 9 ps 1.8 lc {}", colour);
  if (role == "validation")
    return fmt::format("with linespoints lw 1.5 dt 2 pt 7 ps 0.6 lc {}", colour);
  if (points == 1) return fmt::format("with points pt 7 ps 1.2 lc {}", colour);
  return fmt::format("with lines lw 2 lc {}", colour);
}

class ScriptWriter {
 public:
  ScriptWriter(std::span<const ChartRun> runs, const ChartOptions& options)
      : runs_(runs), options_(options), unit_(time_unit(runs)) {
    script_.text = "# dtrain plot: each chart as NAME.png and NAME.svg in this folder\n";
    script_.text += "set encoding utf8\nset grid\nset key below noenhanced\n";
    if (options.x == ChartAxis::kStep) {
      script_.text += "set xlabel 'global step' noenhanced\nset format x '%.0f'\n";
    } else {
      script_.text += fmt::format(
          "set xlabel {} noenhanced\n",
          gnuplot_string(fmt::format("wall-clock {} since the run started", unit_.name)));
    }
    untimed_.assign(runs.size(), false);
    if (options.x == ChartAxis::kTime) note_runs_without_times();
  }

  void add(const ChartSpec& chart) {
    std::vector<std::string> plots;
    for (size_t r = 0; r < runs_.size(); ++r) {
      const size_t before = plots.size();
      for (const ChartLine& line : chart.lines) add_line(line, r, plots);
      if (plots.size() == before && !untimed_[r])
        script_.notes.push_back(fmt::format("{}: {}", runs_[r].label, chart.lacking));
    }
    if (plots.empty()) return;
    script_.charts.push_back(chart.name);
    std::string& s = script_.text;
    s += fmt::format("set terminal pngcairo size {},{} noenhanced\n", options_.width,
                     options_.height);
    s += fmt::format("set output '{}.png'\n", chart.name);
    s += fmt::format("set title {} noenhanced\n", gnuplot_string(chart.title));
    s += fmt::format("set ylabel {} noenhanced\n", gnuplot_string(chart.y_label));
    s += "plot ";
    for (size_t i = 0; i < plots.size(); ++i) s += (i == 0 ? "" : ", ") + plots[i];
    s += "\n";
    s += fmt::format(
        "set terminal svg size {},{} fixed noenhanced background rgb 'white'\n"
        "set output '{}.svg'\nreplot\nunset output\n",
        options_.width, options_.height, chart.name);
  }

  ChartScript take() { return std::move(script_); }

 private:
  void note_runs_without_times() {
    for (size_t r = 0; r < runs_.size(); ++r) {
      if (!has_no_times(*runs_[r].series)) continue;
      untimed_[r] = true;
      script_.notes.push_back(fmt::format(
          "{}: its metrics.jsonl has no wall times (written before dtrain recorded them): "
          "--x step plots it",
          runs_[r].label));
    }
  }

  // The line's points as a datablock, and the plot element that draws it.
  void add_line(const ChartLine& line, size_t run, std::vector<std::string>& plots) {
    const auto found = runs_[run].series->series.find(line.scalar);
    if (found == runs_[run].series->series.end()) return;
    std::string data;
    size_t points = 0;
    for (const SeriesPoint& point : found->second.points) {
      const double x = x_of(point, options_.x, unit_.seconds);
      if (!std::isfinite(x)) continue;
      data += fmt::format("{:.10g} {:.9g}\n", x, point.value);
      ++points;
    }
    if (points == 0) return;
    const std::string block = fmt::format("$d{}", blocks_++);
    script_.text += fmt::format("{} << EOD\n{}EOD\n", block, data);
    const std::string_view role = line.role;
    const std::string title =
        role.empty() ? runs_[run].label : fmt::format("{} ({})", runs_[run].label, role);
    plots.push_back(fmt::format("{} using 1:2 title {} {}", block, gnuplot_string(title),
                                line_style(line, points, run + 1)));
  }

  std::span<const ChartRun> runs_;
  const ChartOptions options_;
  const TimeUnit unit_;
  std::vector<bool> untimed_;  // by run: --x time, and the run has no times at all
  ChartScript script_;
  int blocks_ = 0;
};

}  // namespace

std::vector<std::string> chart_names() {
  std::vector<std::string> names;
  for (const ChartSpec& chart : chart_specs()) names.emplace_back(chart.name);
  return names;
}

std::vector<std::string> chart_scalars() {
  std::vector<std::string> scalars;
  for (const ChartSpec& chart : chart_specs()) {
    for (const ChartLine& line : chart.lines) scalars.emplace_back(line.scalar);
  }
  return scalars;
}

ChartScript chart_script(std::span<const ChartRun> runs, const ChartOptions& options) {
  ScriptWriter writer(runs, options);
  for (const ChartSpec& chart : chart_specs()) writer.add(chart);
  return writer.take();
}

std::string chart_label(std::string_view name) {
  std::string label = escaped(name, /*for_chart=*/false);
  if (label.size() <= kMaxLabelBytes) return label;
  size_t cut = label.size() - (kMaxLabelBytes - 3);  // "…" takes 3 bytes
  while (cut < label.size() && (static_cast<unsigned char>(label[cut]) & 0xC0) == 0x80) ++cut;
  return "…" + label.substr(cut);
}

std::string gnuplot_string(std::string_view text) {
  std::string out = "'";
  for (const char c : escaped(text, /*for_chart=*/true)) {
    out += c;
    if (c == '\'') out += '\'';
  }
  return out + "'";
}

}  // namespace dtrain
