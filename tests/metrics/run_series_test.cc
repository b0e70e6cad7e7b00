// Reading metrics.jsonl back for the charts: one point per step, resumed runs superseding what
// their predecessor logged after the checkpoint, damaged lines and values skipped and counted,
// long files thinned. The files are written here, line by line, in the JSON-lines sink's format.
#include "metrics/run_series.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <string>
#include <vector>

#include "base/error.h"
#include "support/temp_dir.h"

namespace dtrain::testing {
namespace {

using ::testing::HasSubstr;

const std::vector<std::string> kLossAndValidation = {"loss", "validation/loss"};

RunSeries read_lines(const TempDir& dir, const std::vector<std::string>& lines,
                     const SeriesLimits& limits = {}) {
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  write_bytes(dir / "metrics.jsonl", text);
  return read_run_series(dir / "metrics.jsonl", kLossAndValidation, limits);
}

std::vector<std::pair<int64_t, double>> points_of(const RunSeries& run, const std::string& name) {
  std::vector<std::pair<int64_t, double>> out;
  const auto it = run.series.find(name);
  if (it == run.series.end()) return out;
  for (const SeriesPoint& p : it->second.points) out.emplace_back(p.step, p.value);
  return out;
}

using Points = std::vector<std::pair<int64_t, double>>;

TEST(RunSeries, OnePointPerStepTheFirstRecordsValue) {
  TempDir dir;
  const RunSeries run = read_lines(
      dir, {R"({"step":100,"loss":2.0})", R"({"step":100,"loss":1.5,"validation/loss":1.75})",
            R"({"step":200,"loss":1.0})"});
  EXPECT_EQ(run.records, 3);
  EXPECT_EQ(points_of(run, "loss"), (Points{{100, 2.0}, {200, 1.0}}));
  EXPECT_EQ(points_of(run, "validation/loss"), (Points{{100, 1.75}}));
}

TEST(RunSeries, AResumedRunSupersedesWhatWasLoggedAfterItsCheckpoint) {
  TempDir dir;
  const RunSeries run = read_lines(
      dir,
      {R"({"step":0,"start":true,"wall_time":1000})", R"({"step":100,"loss":3,"wall_time":1001})",
       R"({"step":200,"loss":2,"wall_time":1002})", R"({"step":300,"loss":1,"wall_time":1003})",
       // killed after 300; its last checkpoint was at 200
       R"({"step":200,"start":true,"resumed":true,"wall_time":1010})",
       R"({"step":300,"loss":1.5,"wall_time":1011})",
       R"({"step":400,"loss":0.5,"wall_time":1012})"});
  EXPECT_EQ(points_of(run, "loss"), (Points{{100, 3}, {200, 2}, {300, 1.5}, {400, 0.5}}));
  EXPECT_EQ(run.resumptions, 1);
  EXPECT_EQ(run.superseded_points, 1);
  // The clock goes on from the first start, the pause included.
  const std::vector<SeriesPoint>& points = run.series.at("loss").points;
  EXPECT_DOUBLE_EQ(points.front().seconds, 1);
  EXPECT_DOUBLE_EQ(points.back().seconds, 12);
}

TEST(RunSeries, AFreshStartDropsTheEarlierRunAndRestartsTheClock) {
  TempDir dir;
  const RunSeries run = read_lines(
      dir,
      {R"({"step":0,"start":true,"wall_time":50})", R"({"step":100,"loss":3,"wall_time":51})",
       R"({"step":0,"start":true,"wall_time":500})", R"({"step":100,"loss":2,"wall_time":502})"});
  EXPECT_EQ(points_of(run, "loss"), (Points{{100, 2}}));
  EXPECT_DOUBLE_EQ(run.series.at("loss").points[0].seconds, 2);
  EXPECT_EQ(run.resumptions, 0);
}

TEST(RunSeries, WithoutWallTimesPointsHaveNoTime) {
  TempDir dir;
  const RunSeries run = read_lines(dir, {R"({"step":100,"loss":3})"});
  EXPECT_TRUE(std::isnan(run.series.at("loss").points[0].seconds));
}

TEST(RunSeries, LinesThatAreNotRecordsAreSkippedAndCountedTheFirstNamed) {
  TempDir dir;
  const std::string deep = std::string(100, '[') + std::string(100, ']');
  const RunSeries run = read_lines(
      dir,
      {R"({"step":100,"loss":3})", "not json at all", "[1, 2]", R"({"loss":1})",
       R"({"step":-5,"loss":1})", R"({"step":1.5,"loss":1})", R"({"step":"7","loss":1})",
       R"({"step":NaN,"loss":1})", deep, std::string("{\"step\":1\0, \"loss\":1}", 21),
       "{\"step\":300,\"loss\":\"\xff\"}", R"({"step":400,"loss":0.)" + std::string(200, '5') + "}",
       R"({"step":200,"loss":2})", R"({"step":500,"lo)"},
      {.max_line_bytes = 100});
  EXPECT_EQ(run.records, 2);
  EXPECT_EQ(run.skipped_lines, 12);
  EXPECT_EQ(run.first_skipped_line, 2);
  EXPECT_EQ(run.first_skipped_reason, "not JSON");
  EXPECT_EQ(points_of(run, "loss"), (Points{{100, 3}, {200, 2}}));
}

TEST(RunSeries, ValuesThatAreNotFiniteNumbersAreSkippedAndCounted) {
  TempDir dir;
  // metrics.jsonl holds a NaN or an infinite loss as null. A number beyond a double's range
  // (1e999) is no value at all: the parser refuses its line.
  const RunSeries run = read_lines(
      dir, {R"({"step":100,"loss":null})", R"({"step":200,"loss":1e999})",
            R"({"step":300,"loss":"0.5"})", R"({"step":400,"loss":true})",
            R"({"step":500,"loss":[1],"validation/loss":0.25})", R"({"step":600,"loss":0.5})"});
  EXPECT_EQ(run.records, 5);
  EXPECT_EQ(run.skipped_lines, 1);
  EXPECT_EQ(run.bad_values, 4);
  EXPECT_EQ(points_of(run, "loss"), (Points{{600, 0.5}}));
  EXPECT_EQ(points_of(run, "validation/loss"), (Points{{500, 0.25}}));
}

TEST(RunSeries, ALongFileIsThinnedToBoundedPointsEvenlySpaced) {
  TempDir dir;
  std::vector<std::string> lines;
  for (int step = 1; step <= 1000; ++step)
    lines.push_back(R"({"step":)" + std::to_string(step) + R"(,"loss":1})");
  const RunSeries run = read_lines(dir, lines, {.max_points = 100});
  const Series& loss = run.series.at("loss");
  EXPECT_EQ(loss.stride, 16);  // 1000 points in at most 100: every 16th
  ASSERT_EQ(loss.points.size(), 63u);
  for (size_t i = 0; i < loss.points.size(); ++i)
    EXPECT_EQ(loss.points[i].step, 1 + 16 * static_cast<int64_t>(i));
}

TEST(RunSeries, AFifoOrAFolderIsRefusedNotWaitedOn) {
  TempDir dir;
  ASSERT_EQ(::mkfifo((dir / "metrics.jsonl").c_str(), 0600), 0);
  try {
    read_run_series(dir / "metrics.jsonl", kLossAndValidation);
    FAIL() << "a FIFO was read";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("metrics.jsonl: not a regular file"));
  }
  EXPECT_THROW(read_run_series(dir.path(), kLossAndValidation), UsageError);
  EXPECT_THROW(read_run_series(dir / "missing.jsonl", kLossAndValidation), UsageError);
}

}  // namespace
}  // namespace dtrain::testing
