// The chart script as text: names reach it only as quoted strings that nothing can end, a chart
// is drawn only where a run has its points, and what a run lacks is said. That gnuplot draws
// what the script says is tests/cli/plot_test.cc's, through an independent reader.
#include "metrics/run_charts.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>

namespace dtrain::testing {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

RunSeries series_with(const std::vector<std::string>& names, bool timed = true) {
  RunSeries run;
  run.records = 3;
  for (const std::string& name : names) {
    Series& s = run.series[name];
    for (int64_t step : {100, 200, 300}) {
      s.points.push_back(
          {step, timed ? 0.5 * static_cast<double>(step) : std::numeric_limits<double>::quiet_NaN(),
           1.0 / static_cast<double>(step)});
    }
  }
  return run;
}

TEST(RunCharts, AStringEndsOnlyWhereItShouldWhateverTheNameHolds) {
  EXPECT_EQ(gnuplot_string("plain"), "'plain'");
  EXPECT_EQ(gnuplot_string("it's"), "'it''s'");
  EXPECT_EQ(gnuplot_string("a\nsystem('x')\r\x1b[2J"), "'a\\nsystem(''x'')\\x0d\\x1b[2J'");
}

TEST(RunCharts, AChartKeepsWhatItsFontDrawsAndEscapesTheRest) {
  EXPECT_EQ(gnuplot_string("é ß Ω я … €"), "'é ß Ω я … €'");
  EXPECT_EQ(gnuplot_string("运行-🚀"), "'\\u8fd0\\u884c-\\U0001f680'");
  EXPECT_EQ(chart_label("运行-🚀"), "运行-🚀");  // a terminal's report line keeps them
}

TEST(RunCharts, ALabelKeepsUtf8EscapesWhatIsNotAndKeepsTheEndOfALongName) {
  EXPECT_EQ(chart_label("runs/é-🚀"), "runs/é-🚀");
  EXPECT_EQ(chart_label("bad\xff\xc0\xaf"), "bad\\xff\\xc0\\xaf");  // a stray byte, an overlong '/'
  EXPECT_EQ(chart_label("c1\xc2\x9b"), "c1\\xc2\\x9b");             // a C1 control (CSI)
  const std::string long_name = std::string(100, 'x') + "/run-7é";
  const std::string label = chart_label(long_name);
  EXPECT_LE(label.size(), 64u);
  EXPECT_TRUE(label.starts_with("…")) << label;
  EXPECT_TRUE(label.ends_with("/run-7é")) << label;
}

TEST(RunCharts, ANameAddsNoLineToTheScript) {
  const RunSeries run = series_with({"loss"});
  const auto lines = [&](const std::string& label) {
    const std::vector<ChartRun> runs = {{label, &run}};
    const std::string text = chart_script(runs, {}).text;
    return std::count(text.begin(), text.end(), '\n');
  };
  EXPECT_EQ(lines(chart_label("x'\nsystem('touch pwned')\n'")), lines("x"));
}

TEST(RunCharts, OnlyChartsWithPointsAreDrawnAndWhatARunLacksIsSaid) {
  const RunSeries full = series_with({"loss", "validation/loss", "validation/accuracy",
                                      "test_accuracy", "learning_rate", "examples_per_sec"});
  const RunSeries young = series_with({"loss", "learning_rate"});
  const std::vector<ChartRun> runs = {{"runs/full", &full}, {"runs/young", &young}};
  const ChartScript script = chart_script(runs, {});
  EXPECT_THAT(script.charts, ElementsAre("loss", "accuracy", "learning_rate", "throughput"));
  EXPECT_THAT(script.notes, ElementsAre(HasSubstr("runs/young: no accuracy yet"),
                                        HasSubstr("runs/young: no throughput yet")));
  // Each run in its own colour, named in the legend; validation dashed beside its training line.
  EXPECT_THAT(script.text, HasSubstr("title 'runs/full' with lines lw 2 lc 1"));
  EXPECT_THAT(script.text, HasSubstr("title 'runs/full (validation)' with linespoints"));
  EXPECT_THAT(script.text, HasSubstr("title 'runs/young' with lines lw 2 lc 2"));
  for (const char* file : {"'loss.png'", "'loss.svg'", "'throughput.svg'"})
    EXPECT_THAT(script.text, HasSubstr(file));

  const std::vector<ChartRun> alone = {{"runs/young", &young}};
  EXPECT_THAT(chart_script(alone, {}).charts, ElementsAre("loss", "learning_rate"));
}

TEST(RunCharts, AgainstTimeARunWithoutTimesIsNamedAndLeftOut) {
  const RunSeries timed = series_with({"loss"});
  const RunSeries untimed = series_with({"loss"}, false);
  const std::vector<ChartRun> runs = {{"runs/new", &timed}, {"runs/old", &untimed}};
  const ChartScript script = chart_script(runs, {.x = ChartAxis::kTime});
  EXPECT_THAT(script.notes, Contains(HasSubstr("runs/old: its metrics.jsonl has no wall times")));
  EXPECT_THAT(script.notes, Not(Contains(HasSubstr("runs/old: no "))));
  EXPECT_THAT(script.text, HasSubstr("'runs/new'"));
  EXPECT_THAT(script.text, Not(HasSubstr("'runs/old'")));
  // The points at 50, 100, 150 s, in seconds (the unit follows the longest run).
  EXPECT_THAT(script.text, HasSubstr("50 0.01\n100 0.005\n"));
  EXPECT_THAT(script.text, HasSubstr("set xlabel 'wall-clock seconds since the run started'"));
}

}  // namespace
}  // namespace dtrain::testing
