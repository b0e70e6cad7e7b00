// The live page at / of the chief's --metrics_port (issue 52) in a real browser: Debian's
// chromium, headless, loads the page a real 2-worker `dtrain train` serves, with nothing but
// that task to fetch from, and draws it. Its screenshot, read by an independent reader
// (tests/cli/plot/chart_reader.py: zlib and struct), has every curve's colour across its chart,
// and its DOM lists each worker. Skipped, saying so, where chromium is not installed.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/process.h"
#include "support/ps_cluster.h"
#include "support/temp_dir.h"

namespace dtrain {
namespace {

using testing::concat;
using testing::DtrainProcess;
using ::testing::HasSubstr;

// src/metrics/page/page.js's colours: loss, accuracy, learning rate, examples/sec.
const std::vector<std::pair<std::string, std::string>> kCurves = {{"loss", "214,39,40"},
                                                                  {"accuracy", "44,160,44"},
                                                                  {"learning rate", "31,119,180"},
                                                                  {"examples/sec", "148,103,189"}};
// A chart is 460 pixels wide (src/metrics/page/page.css), its plot area some 400 after the
// axis: a curve drawn across it has its colour in most of those columns, text or a legend in
// few. (uPlot anti-aliases, so some columns of a steep stretch hold only blends of it.)
constexpr int kMinColumns = 200;

std::string chromium_path() {
  for (const char* path : {"/usr/bin/chromium", "/usr/bin/chromium-browser"})
    if (::access(path, X_OK) == 0) return path;
  return "";
}

// Headless, at a scale of one (a CSS pixel is a screenshot's pixel), with a profile of its own;
// as root only without its sandbox. The virtual time lets the page's fetches and first drawing
// finish before the picture is taken, with no wait of the test's own.
std::vector<std::string> chromium_args(const std::string& chromium,
                                       const std::filesystem::path& profile) {
  std::vector<std::string> args = {chromium,
                                   "--headless",
                                   "--disable-gpu",
                                   "--hide-scrollbars",
                                   "--no-first-run",
                                   "--force-device-scale-factor=1",
                                   "--window-size=1000,1200",
                                   "--virtual-time-budget=5000",
                                   "--user-data-dir=" + profile.string()};
  if (::geteuid() == 0) args.push_back("--no-sandbox");
  return args;
}

// The chief's own line "[worker0] worker=0: metrics at http://127.0.0.1:P/metrics": its page.
std::string chief_page(DtrainProcess& run) {
  const std::string line = run.wait_for_line("worker=0: metrics at http://");
  const size_t at = line.find("http://");
  const size_t end = line.find("/metrics", at);
  if (at == std::string::npos || end == std::string::npos) return "";
  return line.substr(at, end - at) + "/";
}

TEST(LivePage, ARealBrowserDrawsEveryCurveAndListsEachWorker) {
  const std::string chromium = chromium_path();
  if (chromium.empty())
    GTEST_SKIP() << "no chromium in /usr/bin (Debian: chromium; scripts/setup.sh --tests)";
  // Long enough to outlast the browser; stopped by the test once it has looked.
  DtrainProcess run(concat(
      {"train", "--strategy", "allreduce", "--workers", "2", "--metrics_port", "0", "--train_steps",
       "1000000", "--step_delay_ms", "2", "--validation_size", "1000", "--eval_every", "20"},
      testing::with_flag(testing::softmax_flags(), "--log_every", "5")));
  const std::string page = chief_page(run);
  ASSERT_THAT(page, HasSubstr("http://")) << "the chief said where it serves";
  // 40 step lines and 10 evaluations in the chief's run log: curves, not points.
  ASSERT_THAT(testing::wait_for_global_step(run, 200), HasSubstr("global_step="));

  testing::TempDir dir;
  const std::filesystem::path screenshot = dir / "page.png";
  std::vector<std::string> shoot = chromium_args(chromium, dir / "profile-shot");
  shoot.push_back("--screenshot=" + screenshot.string());
  shoot.push_back(page);
  const testing::ProcessResult shot = testing::run_command(shoot);
  ASSERT_EQ(shot.exit_code, 0) << shot.out << shot.err;
  std::vector<std::string> dump = chromium_args(chromium, dir / "profile-dom");
  dump.push_back("--dump-dom");
  dump.push_back(page);
  const testing::ProcessResult dom = testing::run_command(dump);
  ASSERT_EQ(dom.exit_code, 0) << dom.err;
  run.send_signal(SIGTERM);
  run.wait();

  std::vector<std::string> reader = {
      "/usr/bin/python3", std::string(DTRAIN_SOURCE_DIR) + "/tests/cli/plot/chart_reader.py", "png",
      screenshot.string()};
  for (const auto& [curve, colour] : kCurves) reader.push_back(colour);
  const testing::ProcessResult read = testing::run_command(reader);
  ASSERT_EQ(read.exit_code, 0) << read.err;
  const nlohmann::json pixels = nlohmann::json::parse(read.out);
  EXPECT_EQ(pixels["width"], 1000);
  for (const auto& [curve, colour] : kCurves) {
    EXPECT_GT(pixels["columns"][colour].get<int>(), kMinColumns)
        << curve << " (" << colour << "): " << read.out;
  }

  EXPECT_THAT(dom.out, HasSubstr(R"(<span id="task">worker0</span>)"));
  for (const char* worker : {"worker0", "worker1"}) {
    EXPECT_THAT(dom.out,
                HasSubstr(fmt::format(R"(data-worker="{}" data-state="training")", worker)))
        << dom.out;
  }
  EXPECT_THAT(dom.out, HasSubstr("training: global step")) << dom.out;
}

}  // namespace
}  // namespace dtrain
