// RunBoard, the live page's JSON (/api/run), as pure logic: the series from the run log's records,
// thinned within their bound; the workers' states from their reports and a clock the test turns;
// the stragglers by name. The page in a real browser: tests/metrics/live_page_test.cc.
#include "metrics/run_board.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "metrics/straggler_watch.h"

namespace dtrain {
namespace {

using ::testing::HasSubstr;

// A clock the test turns by hand.
struct BoardClock {
  double now = 100;
  std::function<double()> function() {
    return [this] { return now; };
  }
};

RunRecord board_step_line(int64_t step, double loss) {
  return {step, {{"loss", loss}, {"learning_rate", 0.1}, {"examples_per_sec", 1000.0 + step}}};
}

// [[step, value], ...] of one series of the JSON.
std::vector<std::pair<double, double>> board_points(const nlohmann::json& run,
                                                    const std::string& series) {
  std::vector<std::pair<double, double>> points;
  for (const nlohmann::json& p : run["series"][series]["points"])
    points.emplace_back(p[0].get<double>(), p[2].get<double>());
  return points;
}

const nlohmann::json* board_worker(const nlohmann::json& run, const std::string& name) {
  for (const nlohmann::json& w : run["workers"])
    if (w["name"] == name) return &w;
  return nullptr;
}

TEST(RunBoard, TheSeriesAreTheRunLogsStepLinesAndEvaluations) {
  BoardClock clock;
  RunBoard board("local", {}, clock.function());
  board.record({.step = 0, .start = true});
  board.record(board_step_line(10, 2.0));
  clock.now += 3;
  board.record(board_step_line(20, 1.5));
  board.record({20, {{"epoch", 1}, {"validation/accuracy", 0.8}}});
  board.record({20, {{"test_accuracy", 0.9}}, true});
  const nlohmann::json run = nlohmann::json::parse(board.json());
  using Points = std::vector<std::pair<double, double>>;
  EXPECT_EQ(board_points(run, "loss"), (Points{{10, 2.0}, {20, 1.5}}));
  EXPECT_EQ(board_points(run, "learning_rate"), (Points{{10, 0.1}, {20, 0.1}}));
  EXPECT_EQ(board_points(run, "examples_per_sec"), (Points{{10, 1010}, {20, 1020}}));
  EXPECT_EQ(board_points(run, "accuracy"), (Points{{20, 0.8}}));
  // Wall time: seconds since the board began, by its clock.
  EXPECT_EQ(run["series"]["loss"]["points"][1][1], 3.0);
  EXPECT_EQ(run["test_accuracy"], 0.9);
  EXPECT_EQ(run["step"], 20);
  EXPECT_EQ(run["finished"], true);
}

TEST(RunBoard, NonFiniteValuesAndStepsGoneBackAreNotPoints) {
  RunBoard board("local");
  board.record(board_step_line(10, std::numeric_limits<double>::quiet_NaN()));
  board.record(board_step_line(20, 1.0));
  board.record(board_step_line(20, 9.0));  // a second value at a step: the first is kept
  board.record(board_step_line(5, 9.0));
  board.record(board_step_line(30, std::numeric_limits<double>::infinity()));
  const nlohmann::json run = board.to_json();
  EXPECT_EQ(board_points(run, "loss"), (std::vector<std::pair<double, double>>{{20, 1.0}}));
  EXPECT_TRUE(run["test_accuracy"].is_null());
  // What a browser's JSON.parse reads: no NaN or Infinity anywhere.
  EXPECT_THAT(board.json(), ::testing::Not(HasSubstr("NaN")));
}

TEST(RunBoard, ASeriesPastItsBoundKeepsEveryStrideThValueAndStaysWithinIt) {
  constexpr size_t kMax = 16;
  constexpr int kRecords = 1000;
  RunBoard board("local", {.max_points = kMax});
  for (int i = 0; i < kRecords; ++i) board.record(board_step_line(i + 1, 1.0 / (i + 1)));
  const nlohmann::json loss = board.to_json()["series"]["loss"];
  const int64_t stride = loss["stride"];
  ASSERT_GT(stride, 1);
  const nlohmann::json& points = loss["points"];
  EXPECT_LE(points.size(), kMax);
  // The values that came at multiples of the stride, every one of them, in order.
  ASSERT_EQ(points.size(), static_cast<size_t>((kRecords + stride - 1) / stride));
  for (size_t i = 0; i < points.size(); ++i) {
    const double step = static_cast<double>(i) * static_cast<double>(stride) + 1;
    EXPECT_EQ(points[i][0], step) << i;
    EXPECT_EQ(points[i][2], 1.0 / step) << i;
  }
  // Half the bound or more is kept: thinning halves, no more.
  EXPECT_GE(2 * points.size(), kMax);
}

TEST(RunBoard, ALocalRunsOwnStepsAreItsOnlyWorker) {
  BoardClock clock;
  RunBoard board("local", {}, clock.function());
  board.own_step(1, 0.004);
  board.own_step(2, 0.002);
  const nlohmann::json run = board.to_json();
  ASSERT_EQ(run["workers"].size(), 1u);
  const nlohmann::json& local = run["workers"][0];
  EXPECT_EQ(local["name"], "local");
  EXPECT_EQ(local["step"], 2);
  EXPECT_DOUBLE_EQ(local["step_ms"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(local["mean_step_ms"].get<double>(), 3.0);
  EXPECT_EQ(local["state"], "training");
}

TEST(RunBoard, TheChiefsReportNamesEveryWorkerAndItsStraggler) {
  StragglerWatch watch("its own part of a step");
  const std::vector<float> seconds = {0.010f, 0.030f, 0.010f};
  const auto name = [](int rank) { return "worker" + std::to_string(rank); };
  RunBoard board("worker0");
  board.own_step(1, 0.05);  // replaced by the report, which names the chief as worker0 too
  for (int step = 1; step <= StragglerWatch::kSteps; ++step) {
    watch.observe(seconds, name);
    board.own_step(step, 0.05);
    board.workers(watch.times(seconds, name));
  }
  const nlohmann::json run = board.to_json();
  ASSERT_EQ(run["workers"].size(), 3u) << run.dump();
  for (const char* worker : {"worker0", "worker2"}) {
    ASSERT_NE(board_worker(run, worker), nullptr) << worker;
    EXPECT_EQ((*board_worker(run, worker))["state"], "training") << worker;
  }
  const nlohmann::json& slow = *board_worker(run, "worker1");
  EXPECT_EQ(slow["state"], "straggler");
  EXPECT_EQ(slow["step"], StragglerWatch::kSteps);
  EXPECT_NEAR(slow["step_ms"].get<double>(), 30.0, 1e-3);
  ASSERT_EQ(run["stragglers"].size(), 1u);
  EXPECT_EQ(run["stragglers"][0]["name"], "worker1");
  EXPECT_THAT(run["stragglers"][0]["line"].get<std::string>(), HasSubstr("worker1 is a straggler"));
}

TEST(RunBoard, AWorkerSilentForLongIsStalledAndOneMissingFromTheReportHasLeft) {
  BoardClock clock;
  RunBoard board("worker0", {.stall_seconds = 5}, clock.function());
  board.workers({.workers = {{"worker0", 0.01}, {"worker1", 0.01}, {"worker2", 0.01}}});
  // worker1 has not stepped since (a ps report: -1), worker2 is no longer in the job.
  clock.now += 4;
  board.workers({.workers = {{"worker0", 0.01}, {"worker1", -1}}});
  nlohmann::json run = board.to_json();
  EXPECT_EQ((*board_worker(run, "worker1"))["state"], "training") << "4 s is not yet a stall";
  EXPECT_EQ((*board_worker(run, "worker2"))["state"], "left");
  clock.now += 2;
  board.workers({.workers = {{"worker0", 0.01}, {"worker1", -1}}});
  run = board.to_json();
  EXPECT_EQ((*board_worker(run, "worker0"))["state"], "training");
  EXPECT_EQ((*board_worker(run, "worker1"))["state"], "stalled");
  ASSERT_EQ(run["stalled"].size(), 1u);
  EXPECT_EQ(run["stalled"][0]["name"], "worker1");
  EXPECT_DOUBLE_EQ(run["stalled"][0]["seconds"].get<double>(), 6.0);
}

TEST(RunBoard, ASlowRunIsNotStalledWithinTwentyOfItsSteps) {
  BoardClock clock;
  RunBoard board("local", {.stall_seconds = 5}, clock.function());
  board.own_step(1, 1.0);  // one-second steps
  clock.now += 10;
  EXPECT_EQ(board.to_json()["workers"][0]["state"], "training");
  clock.now += 11;
  EXPECT_EQ(board.to_json()["workers"][0]["state"], "stalled");
}

TEST(RunBoard, TheWorkersAndStragglersKeptAreBounded) {
  RunBoard board("worker0", {.max_workers = 4, .max_stragglers = 2});
  WorkerTimes times;
  for (int w = 0; w < 10; ++w) {
    times.workers.push_back({"worker" + std::to_string(w), 0.01});
    times.stragglers.emplace_back("worker" + std::to_string(w), "a straggler");
  }
  board.workers(times);
  const nlohmann::json run = board.to_json();
  EXPECT_EQ(run["workers"].size(), 4u);
  EXPECT_EQ(run["stragglers"].size(), 2u);
  EXPECT_EQ(run["stragglers_dropped"], 8);
}

}  // namespace
}  // namespace dtrain
