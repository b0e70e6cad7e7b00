// The charts `dtrain plot` draws from runs' series (metrics/run_series.h) — loss, accuracy,
// learning rate and throughput, each against the global step or the time — as one gnuplot script
// that writes NAME.png and NAME.svg for each chart into its working directory. Pure text: running
// gnuplot is the command's business (cli/gnuplot.h). Nothing the user named reaches the script but
// as a quoted string (gnuplot_string), and no path at all.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "metrics/run_series.h"

namespace dtrain {

enum class ChartAxis { kStep, kTime };

struct ChartRun {
  std::string label;  // its name in legends and notes (chart_label)
  const RunSeries* series = nullptr;
};

struct ChartOptions {
  ChartAxis x = ChartAxis::kStep;
  int width = 800;  // pixels, of the PNG and the SVG alike
  int height = 500;
};

struct ChartScript {
  std::string text;                 // the gnuplot script
  std::vector<std::string> charts;  // the charts it draws, by name ("loss", ...)
  std::vector<std::string> notes;   // what a run lacks, one line each
};

// Every chart's name, in the order they are drawn: loss, accuracy, learning_rate, throughput.
std::vector<std::string> chart_names();
// The scalars of metrics.jsonl the charts draw: what read_run_series needs to read.
std::vector<std::string> chart_scalars();

// The script for the charts that at least one run has points for; each run has a colour of its
// own and is named in every chart's legend. REQUIRES: every run's series is set.
ChartScript chart_script(std::span<const ChartRun> runs, const ChartOptions& options);

// A name as a legend and a report line show it: valid UTF-8 stays (so a name in any script
// reads as it is), a control character or a byte that is not UTF-8 is written as a C escape (\n,
// \x1b), and a name longer than 64 bytes keeps its end, where runs' names differ, after "…".
std::string chart_label(std::string_view name);
// text as a gnuplot string literal: single-quoted, the one quoting in which only a doubled quote
// is special, with control characters escaped as chart_label does, so nothing in it can end the
// command it is part of, and the characters outside Latin, Greek, Cyrillic and the general
// punctuation (what DejaVu Sans, gnuplot's font on Debian, draws) as \uXXXX or \UXXXXXXXX.
std::string gnuplot_string(std::string_view text);

}  // namespace dtrain
