// `dtrain plot` over real runs, read back by an independent reader (tests/cli/plot/chart_reader.py:
// Python's xml for gnuplot's SVG, zlib and struct for the PNG, json for metrics.jsonl): the loss
// line has a point for every step the run logged a loss at, and falls; several runs are several
// lines, each named in the legend; the PNG is a PNG of the asked size in the runs' colours; what
// a run lacks is said; hostile files, names and folders are skipped, counted or refused.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <csignal>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "support/process.h"
#include "support/temp_dir.h"

namespace dtrain::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const std::string kChartReader = std::string(DTRAIN_SOURCE_DIR) + "/tests/cli/plot/chart_reader.py";
// gnuplot's colours for its first two line types (lc 1, lc 2): the first run's and the second's.
const std::string kFirstRunColour = "148,0,211";
const std::string kSecondRunColour = "0,158,115";

nlohmann::json read_chart(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/usr/bin/python3", kChartReader};
  argv.insert(argv.end(), args.begin(), args.end());
  const ProcessResult r = run_command(argv);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

// The steps with a loss in metrics.jsonl, by the reader's own reading of the file.
std::vector<int64_t> logged_loss_steps(const fs::path& run) {
  const nlohmann::json read = read_chart({"jsonl", (run / "metrics.jsonl").string(), "loss"});
  std::vector<int64_t> steps;
  for (const auto& point : read["points"]) steps.push_back(point[0].get<int64_t>());
  return steps;
}

// The series of an SVG chart whose legend title is `title`; null when there is none.
nlohmann::json svg_series_titled(const nlohmann::json& chart, const std::string& title) {
  for (const auto& series : chart["series"])
    if (series["title"] == title) return series;
  return nullptr;
}

// A falling line in SVG coordinates, where y grows downwards: its last points lower on the page
// than its first.
bool falls(const nlohmann::json& points) {
  const size_t n = points.size();
  if (n < 6) return false;
  double first = 0, last = 0;
  for (size_t i = 0; i < 3; ++i) {
    first += points[i][1].get<double>();
    last += points[n - 1 - i][1].get<double>();
  }
  return last > first + 3 * 10.0;  // ten pixels lower on average
}

std::vector<std::string> train_args(const fs::path& dir, std::vector<std::string> extra) {
  std::vector<std::string> args = {"train",     "--model",     "softmax", "--train_steps",
                                   "400",       "--log_every", "20",      "--eval_every",
                                   "100",       "--threads",   "1",       "--train_dir",
                                   dir.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// Two finished runs, trained once for the suite: one local, one all-reduce over two workers.
class PlotCommand : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    runs_ = new TempDir();
    const ProcessResult local = run_dtrain(train_args(local_run(), {}));
    ASSERT_EQ(local.exit_code, 0) << local.out << local.err;
    const ProcessResult allreduce =
        run_dtrain(train_args(allreduce_run(), {"--strategy", "allreduce", "--workers", "2"}));
    ASSERT_EQ(allreduce.exit_code, 0) << allreduce.out << allreduce.err;
  }
  static void TearDownTestSuite() {
    delete runs_;
    runs_ = nullptr;
  }
  static fs::path local_run() { return runs_->path() / "local"; }
  static fs::path allreduce_run() { return runs_->path() / "allreduce"; }

  static TempDir* runs_;
};
TempDir* PlotCommand::runs_ = nullptr;

TEST_F(PlotCommand, OneRunsLossFallsWithAPointForEveryStepItLoggedAndThePngIsOfTheAskedSize) {
  TempDir work;
  // As a user names it, relative to where dtrain runs (scripts/train.sh's runs/train-…).
  const fs::path run = fs::relative(work / "run", fs::current_path());
  fs::copy(local_run(), run, fs::copy_options::recursive);
  const ProcessResult r = run_dtrain({"plot", run.string(), "--size", "640x400"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const fs::path plots = run / "plots";  // beside the run's files, by default
  EXPECT_THAT(r.out, HasSubstr("wrote " + (plots / "loss").string() + ".png and .svg"));
  for (const char* chart : {"loss", "accuracy", "learning_rate", "throughput"}) {
    for (const char* extension : {".png", ".svg"}) {
      EXPECT_TRUE(fs::is_regular_file(plots / (std::string(chart) + extension)))
          << chart << extension;
    }
  }

  const std::vector<int64_t> steps = logged_loss_steps(run);
  ASSERT_EQ(steps.size(), 20u) << "a loss every 20 of the 400 steps";
  const nlohmann::json loss = read_chart({"svg", (plots / "loss.svg").string()});
  EXPECT_EQ(loss["width"], 640);
  EXPECT_EQ(loss["height"], 400);
  const nlohmann::json training = svg_series_titled(loss, run.string());
  ASSERT_FALSE(training.is_null()) << loss.dump();
  EXPECT_EQ(training["legend"][0], run.string());
  EXPECT_EQ(training["points"].size(), steps.size()) << training.dump();
  EXPECT_TRUE(falls(training["points"])) << training.dump();
  // The x of each point grows with its step.
  for (size_t i = 1; i < training["points"].size(); ++i)
    EXPECT_GT(training["points"][i][0].get<double>(), training["points"][i - 1][0].get<double>());
  const nlohmann::json validation = svg_series_titled(loss, run.string() + " (validation)");
  ASSERT_FALSE(validation.is_null()) << loss.dump();
  EXPECT_EQ(validation["points"].size(), 4u) << "an evaluation every 100 steps";

  const nlohmann::json png =
      read_chart({"png", (plots / "loss.png").string(), kFirstRunColour, kSecondRunColour});
  EXPECT_EQ(png["width"], 640);
  EXPECT_EQ(png["height"], 400);
  EXPECT_GT(png["pixels"][kFirstRunColour].get<int>(), 100) << "the run's line is drawn";
  EXPECT_EQ(png["pixels"][kSecondRunColour].get<int>(), 0) << "one run, one colour";
}

TEST_F(PlotCommand, TwoRunsAreTwoLinesEachNamedInTheLegendAgainstTimeToo) {
  TempDir out;
  for (const char* x : {"step", "time"}) {
    const ProcessResult r = run_dtrain({"plot", local_run().string(), allreduce_run().string(),
                                        "--output", out.path().string(), "--x", x});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const nlohmann::json loss = read_chart({"svg", (out / "loss.svg").string()});
    for (const fs::path& run : {local_run(), allreduce_run()}) {
      const nlohmann::json series = svg_series_titled(loss, run.string());
      ASSERT_FALSE(series.is_null()) << x << ": " << run << " not in " << loss.dump();
      EXPECT_EQ(series["points"].size(), logged_loss_steps(run).size()) << x << ": " << run;
      EXPECT_TRUE(falls(series["points"])) << x << ": " << series.dump();
      for (size_t i = 1; i < series["points"].size(); ++i) {
        EXPECT_GT(series["points"][i][0].get<double>(), series["points"][i - 1][0].get<double>())
            << x << ": " << run;
      }
    }
    const nlohmann::json png =
        read_chart({"png", (out / "throughput.png").string(), kFirstRunColour, kSecondRunColour});
    EXPECT_GT(png["pixels"][kFirstRunColour].get<int>(), 100) << x;
    EXPECT_GT(png["pixels"][kSecondRunColour].get<int>(), 100) << x;
  }
}

TEST_F(PlotCommand, ARunStillTrainingIsPlottedAsFarAsItGotSayingWhatItLacks) {
  TempDir run;
  DtrainProcess training({"train", "--model", "softmax", "--train_steps", "1000000", "--log_every",
                          "20", "--threads", "1", "--step_delay_ms", "1", "--train_dir",
                          run.path().string()});
  ASSERT_THAT(training.wait_for_line("step 200,"), HasSubstr("step 200, loss = "));
  // An earlier plot's accuracy chart would show what this run does not have.
  fs::create_directory(run / "plots");
  write_bytes(run / "plots/accuracy.png", "an earlier chart");
  const ProcessResult r = run_dtrain({"plot", run.path().string()});
  training.send_signal(SIGTERM);
  const ProcessResult stopped = training.wait();
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr(run.path().string() + ": no accuracy yet (the validation accuracy "
                                                     "comes with --eval_every"));
  EXPECT_THAT(r.out, HasSubstr("wrote " + (run / "plots/loss").string()));
  EXPECT_THAT(r.out, HasSubstr("removed " + (run / "plots/accuracy.png").string() +
                               " of an earlier plot: no run has its points now"));
  EXPECT_FALSE(fs::exists(run / "plots/accuracy.png"));
  const nlohmann::json loss = read_chart({"svg", (run / "plots/loss.svg").string()});
  const nlohmann::json series = svg_series_titled(loss, run.path().string());
  ASSERT_FALSE(series.is_null()) << loss.dump();
  EXPECT_GE(series["points"].size(), 10u) << "the step lines up to step 200 at least";
  EXPECT_EQ(stopped.exit_code, 128 + SIGTERM) << stopped.err;
}

TEST_F(PlotCommand, AResumedRunIsOneLineAndSaysItResumed) {
  TempDir run;
  const std::vector<std::string> args = {
      "train",     "--model", "softmax",     "--train_steps",    "400", "--log_every", "20",
      "--threads", "1",       "--train_dir", run.path().string()};
  std::vector<std::string> slow = args;
  slow.insert(slow.end(), {"--step_delay_ms", "2"});
  DtrainProcess first(slow);
  ASSERT_THAT(first.wait_for_line("step 100,"), HasSubstr("step 100, loss = "));
  first.send_signal(SIGTERM);
  const ProcessResult stopped = first.wait();
  ASSERT_EQ(stopped.exit_code, 128 + SIGTERM) << stopped.out << stopped.err;
  const ProcessResult resumed = run_dtrain(args);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  ASSERT_THAT(resumed.out, HasSubstr("resuming from it"));

  // Each start of the run is a line of its own, the resumed one at its checkpoint's step.
  const std::string text = read_bytes(run / "metrics.jsonl");
  const nlohmann::json first_line = nlohmann::json::parse(text.substr(0, text.find('\n')));
  EXPECT_EQ(first_line["step"], 0);
  EXPECT_EQ(first_line["start"], true);
  EXPECT_TRUE(first_line["wall_time"].is_number_float());
  EXPECT_THAT(text, HasSubstr(R"({"resumed":true,"start":true,"step":)"));

  const ProcessResult r = run_dtrain({"plot", run.path().string(), "--x", "time"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("; resumed 1 time, "));
  const nlohmann::json series = svg_series_titled(
      read_chart({"svg", (run / "plots/loss.svg").string()}), run.path().string());
  ASSERT_FALSE(series.is_null());
  EXPECT_EQ(series["points"].size(), logged_loss_steps(run.path()).size());
  for (size_t i = 1; i < series["points"].size(); ++i)
    EXPECT_GT(series["points"][i][0].get<double>(), series["points"][i - 1][0].get<double>());
}

TEST_F(PlotCommand, DamagedLinesAndValuesAreSkippedAndCountedAndTheRestPlotted) {
  TempDir work;
  const fs::path run = work / "run";
  fs::copy(local_run(), run, fs::copy_options::recursive);
  std::string hostile = read_bytes(run / "metrics.jsonl");
  const auto first_hostile_line = std::count(hostile.begin(), hostile.end(), '\n') + 1;
  hostile += "{\"step\": 401, \"loss\": NaN}\n";                // not JSON: NaN is no JSON number
  hostile += "{\"step\": 402, \"loss\": null}\n";               // how dtrain writes a NaN
  hostile += "{\"step\": 403, \"loss\": 1e999}\n";              // beyond a double: not JSON
  hostile += "{\"step\": 404, \"loss\": \"0.1\"}\n";            // a string
  hostile += "not json\n";                                      // garbage
  hostile += std::string(100, '[') + "\n";                      // deeper than a record
  hostile += std::string("{\"step\":405,\0\"loss\":1}\n", 23);  // a NUL byte
  hostile += "{\"step\": 406, \"loss\": \"\xff\xfe\"}\n";       // not UTF-8
  hostile += "{\"step\": 407, \"pad\": \"" + std::string(100 * 1024, 'x') + "\"}\n";  // too long
  hostile += "{\"step\": 408, \"lo";  // cut: the writer was killed
  write_bytes(run / "metrics.jsonl", hostile);

  const ProcessResult r = run_dtrain({"plot", run.string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr(fmt::format(
                         "skipped 8 lines that are not records (the first, line {}: not JSON)",
                         first_hostile_line)));
  EXPECT_THAT(r.out, HasSubstr("skipped 2 values that are not finite numbers"));
  const nlohmann::json series =
      svg_series_titled(read_chart({"svg", (run / "plots/loss.svg").string()}), run.string());
  ASSERT_FALSE(series.is_null());
  EXPECT_EQ(series["points"].size(), logged_loss_steps(run).size());
  EXPECT_EQ(series["points"].size(), 20u);
}

TEST_F(PlotCommand, AHugeFileIsThinnedInBoundedMemoryNotRefused) {
  // Synthetic (seeded): 60,000 records, far more than a chart can show.
  TempDir run;
  std::mt19937 random(52);
  std::uniform_real_distribution<double> noise(0, 0.1);
  std::string text = "{\"step\":0,\"start\":true,\"wall_time\":1000}\n";
  for (int step = 1; step <= 60000; ++step) {
    text += fmt::format("{{\"step\":{},\"loss\":{},\"wall_time\":{}}}\n", step,
                        2.0 / (1 + step / 1000.0) + noise(random), 1000 + step * 0.01);
  }
  write_bytes(run / "metrics.jsonl", text);
  const ProcessResult r = run_dtrain({"plot", run.path().string(), "--x", "time"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("60001 records; loss: 1 point in 4 drawn"));
  const nlohmann::json series = svg_series_titled(
      read_chart({"svg", (run / "plots/loss.svg").string()}), run.path().string());
  ASSERT_FALSE(series.is_null());
  EXPECT_EQ(series["points"].size(), 15000u);
  EXPECT_TRUE(falls(series["points"]));
}

TEST_F(PlotCommand, NamesWithQuotesNewlinesAndUnicodePlotAndRunNothing) {
  TempDir work;
  const fs::path marker = work / "PWNED";
  // Were the quote or the newline to end the legend's string, the next line would run a command.
  const std::string name =
      "it's a \"run\" $(touch PWNED) é🚀' w l\nsystem('touch \"$PLOT_TEST_MARKER\"')\nprint 'x";
  const fs::path run = work / name;
  fs::copy(local_run(), run, fs::copy_options::recursive);
  const ProcessResult r = run_dtrain({"plot", run.string(), "--output", (work / "out").string()},
                                     {"PLOT_TEST_MARKER=" + marker.string()});
  EXPECT_FALSE(fs::exists(marker)) << "a name ran a command";
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // The legend shows the name's end, its newlines as \n.
  const nlohmann::json loss = read_chart({"svg", (work / "out/loss.svg").string()});
  ASSERT_FALSE(loss["series"].empty()) << loss.dump();
  const std::string title = loss["series"][0]["title"];
  EXPECT_TRUE(title.starts_with("…")) << title;
  // The rocket, which no font of the machine has, as its C escape.
  EXPECT_TRUE(
      title.ends_with("é\\U0001f680' w l\\nsystem('touch \"$PLOT_TEST_MARKER\"')\\nprint 'x"))
      << title;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 5) << "one line each:\n" << r.out;
}

TEST_F(PlotCommand, CharactersNoFontHasAreEscapedInTheChartsNotDrawnOverThem) {
  TempDir work;
  const std::string name = "运行 🚀";  // CJK, which DejaVu lacks, and an emoji
  fs::copy(local_run(), work / name, fs::copy_options::recursive);
  const ProcessResult r =
      run_dtrain({"plot", (work / name).string(), "--output", (work / "out").string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr(name + ": 26 records")) << "the report line keeps the name";
  const nlohmann::json loss = read_chart({"svg", (work / "out/loss.svg").string()});
  ASSERT_FALSE(loss["series"].empty()) << loss.dump();
  const std::string title = loss["series"][0]["title"];
  EXPECT_TRUE(title.ends_with("/\\u8fd0\\u884c \\U0001f680")) << title;
  const std::string black = "0,0,0";
  const ProcessResult plain =
      run_dtrain({"plot", local_run().string(), "--output", (work / "plain").string()});
  ASSERT_EQ(plain.exit_code, 0) << plain.out << plain.err;
  const nlohmann::json named = read_chart({"png", (work / "out/loss.png").string(), black});
  const nlohmann::json plain_png = read_chart({"png", (work / "plain/loss.png").string(), black});
  EXPECT_LT(named["pixels"][black].get<int>(), 2 * plain_png["pixels"][black].get<int>())
      << "plain: " << plain_png.dump();
}

TEST_F(PlotCommand, WithoutGnuplotItSaysWhichPackageToInstall) {
  const ProcessResult r =
      run_dtrain({"plot", local_run().string(), "--output", (runs_->path() / "none").string()},
                 {"PATH=/nonexistent:relative/bin"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("gnuplot is not installed"));
  EXPECT_THAT(r.err, HasSubstr("install Debian's gnuplot-nox"));
}

TEST_F(PlotCommand, BadFoldersFilesAndFlagsAreRefusedNamingThem) {
  TempDir work;
  fs::create_directory(work / "empty");
  write_bytes(work / "file", "x");
  fs::create_directory(work / "nothing_yet");
  write_bytes(work / "nothing_yet/metrics.jsonl", "");
  fs::create_directory(work / "garbage");
  write_bytes(work / "garbage/metrics.jsonl", "\x01\x02\n{{{\n");
  fs::create_directory(work / "fifo");
  ASSERT_EQ(::mkfifo((work / "fifo/metrics.jsonl").c_str(), 0600), 0);
  const std::string local = local_run().string();
  const std::string w = work.path().string();
  struct Refusal {
    std::vector<std::string> args;
    int exit_code;
    std::string says;
  };
  const std::vector<Refusal> refusals = {
      {{w + "/missing"}, 2, w + "/missing: no such folder"},
      {{w + "/file"}, 2, w + "/file: not a folder"},
      {{w + "/empty"},
       2,
       w + "/empty: no metrics.jsonl in it: dtrain writes one into a run's "
           "--train_dir"},
      {{w + "/fifo"}, 2, w + "/fifo/metrics.jsonl: not a regular file"},
      {{w + "/nothing_yet"}, 1, w + "/nothing_yet/metrics.jsonl: no records yet"},
      {{w + "/garbage"},
       1,
       "no records yet (2 lines are not records; the first, line 1: not JSON)"},
      {{local, local + "/", "--output", w}, 2, local + ": given twice"},
      {{local, w + "/empty"}, 2, "--output: 2 runs are overlaid"},
      {{local, "--x", "epoch"}, 2, "--x: 'epoch' is neither step nor time"},
      {{local, "--size", "800"}, 2, "--size: '800' is not WIDTHxHEIGHT"},
      {{local, "--size", "99999x10"}, 2, "--size: '99999x10' is not WIDTHxHEIGHT"},
      {{local, "--output", w + "/file"}, 2, "--output " + w + "/file: not a folder"},
  };
  for (const Refusal& refusal : refusals) {
    std::vector<std::string> args = {"plot"};
    args.insert(args.end(), refusal.args.begin(), refusal.args.end());
    const ProcessResult r = run_dtrain(args);
    EXPECT_EQ(r.exit_code, refusal.exit_code) << refusal.says << "\n" << r.out << r.err;
    EXPECT_THAT(r.err, HasSubstr(refusal.says));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
}  // namespace dtrain::testing
