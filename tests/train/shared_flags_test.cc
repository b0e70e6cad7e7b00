// The shared-flag contract, strategy by strategy, on real processes: the flags every strategy
// shares (--eval_every, --save_steps, --log_every, --learning_rate, --moving_average_decay,
// --target_accuracy, --train_dir) do the same under local, towers, async, sync and allreduce, and
// the checkpoint each leaves evaluates with `dtrain eval` to the accuracy the run reported (their
// refusals of bad values and of flags foreign to a strategy: tests/plan/flags_test.cc). The run log
// is read twice: metrics.jsonl, and the TensorBoard event files through an independent reader.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "ckpt/checkpoint_manager.h"
#include "support/checkpoints.h"
#include "support/process.h"
#include "support/tb_events.h"
#include "support/temp_dir.h"
#include "support/text_match.h"

namespace dtrain::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct StrategyCase {
  std::string name;
  std::vector<std::string> flags;  // what selects it
  bool distributed;
  // Async: the chief's global step jumps by the other workers' pushes, by many while it evaluates
  // or writes a checkpoint, so a cadence falls due at the first step past each multiple instead.
  bool exact_cadence;
};

std::ostream& operator<<(std::ostream& os, const StrategyCase& c) { return os << c.name; }

std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The accuracy the run reported last: the chief's (worker 0) under a distributed strategy.
double reported_accuracy(const std::string& out, bool distributed) {
  double accuracy = -1;
  for (const Match& line : all_matches(out, distributed ? R"(worker=0: test accuracy = ([0-9.]+))"
                                                        : R"(^test accuracy = ([0-9.]+))"))
    accuracy = std::stod(line[1]);
  return accuracy;
}

std::vector<nlohmann::json> records_in(const std::filesystem::path& metrics) {
  std::vector<nlohmann::json> records;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) records.push_back(nlohmann::json::parse(line));
  return records;
}

class SharedFlags : public ::testing::TestWithParam<StrategyCase> {
 protected:
  std::vector<std::string> train(const std::vector<std::string>& flags) const {
    return concat(concat({"train", "--model", "softmax", "--threads", "1", "--batch_size", "50"},
                         GetParam().flags),
                  flags);
  }
};

TEST_P(SharedFlags, CadencesRunLogAndCheckpointsAreTheSameAndTheCheckpointEvaluatesAsReported) {
  const StrategyCase& s = GetParam();
  TempDir dir;
  const ProcessResult r =
      run_dtrain(train({"--train_steps", "240", "--eval_every", "80", "--save_steps", "80",
                        "--keep_checkpoints", "0", "--log_every", "10", "--learning_rate", "0.3",
                        "--moving_average_decay", "0.99", "--train_dir", dir.path().string()}));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;

  // Evaluations of the validation set when the global step reaches each multiple of 80 (async:
  // passes it), then the closing record with the test accuracy.
  std::vector<int64_t> evaluated;
  int64_t step_records = 0;
  std::optional<nlohmann::json> closing;
  for (const auto& record : records_in(dir.path() / "metrics.jsonl")) {
    if (record.value("final", false)) {
      closing = record;
    } else if (record.contains("validation/accuracy")) {
      EXPECT_FALSE(record.contains("test_accuracy")) << "the test set is judged once, at the end";
      EXPECT_GT(record["validation/loss"].get<double>(), 0);
      evaluated.push_back(record["step"].get<int64_t>());
    } else if (record.contains("loss")) {
      ++step_records;
    }
  }
  auto expect_cadence = [&](const std::vector<int64_t>& steps, size_t at_least) {
    ASSERT_GE(steps.size(), at_least) << r.out;
    for (size_t i = 0; i < steps.size(); ++i) {
      if (s.exact_cadence) {
        EXPECT_EQ(steps[i], 80 * static_cast<int64_t>(i + 1)) << r.out;
      } else {  // each one past a multiple of its own
        EXPECT_GE(steps[i] / 80, i == 0 ? 1 : steps[i - 1] / 80 + 1) << r.out;
      }
    }
  };
  // Async: while the chief evaluates at the first multiple, the other worker may take the rest of
  // the 240 steps (through memory, a softmax step is microseconds), so only that one is certain.
  expect_cadence(evaluated, s.exact_cadence ? 3 : 1);
  // The chief writes the loss every 10 of its own steps; async's other worker may take all but a
  // few of them (the chief's line says how many it took), every other strategy's chief all 240.
  const auto chief_steps =
      first_match(r.out, R"(worker=0: training elapsed time: [0-9.]+ s \(([0-9]+) local steps)");
  if (s.exact_cadence || !chief_steps || std::stoll((*chief_steps)[1]) >= 10) {
    EXPECT_GE(step_records, 1) << "--log_every writes the loss to the run log\n" << r.out;
  }
  ASSERT_TRUE(closing.has_value());

  // Checkpoints at the same cadence, the last at the final step, carrying the run's settings.
  std::vector<int64_t> saved;
  for (const auto& file : CheckpointManager(dir.path(), 0).list())
    saved.push_back(*CheckpointManager::step_of(file.filename().string()));
  ASSERT_FALSE(saved.empty());
  // The last one holds the final state, at whatever step the chief stopped (checked below): under
  // async that can fall short of the next multiple, when the other workers' pushes end the run.
  if (!s.exact_cadence) saved.pop_back();
  expect_cadence(saved, s.exact_cadence ? 3 : 0);
  const Checkpoint newest = newest_checkpoint(dir.path());
  EXPECT_EQ(newest.global_step, (*closing)["step"].get<int64_t>());
  EXPECT_EQ(newest.model, "softmax");
  EXPECT_FLOAT_EQ(newest.config["learning_rate"].get<float>(), 0.3f);
  EXPECT_FLOAT_EQ(newest.config["moving_average_decay"].get<float>(), 0.99f);
  EXPECT_TRUE(newest.config["eval_moving_average"].get<bool>());

  // The same run log as TensorBoard events (read by the independent reader): the loss at every
  // step line, the validation and test accuracies, histograms of softmax's variables and gradients
  // every 100 global steps (the default --summary_steps), and a run per worker of a distributed
  // strategy.
  const std::vector<std::filesystem::path> event_files_here = event_files(dir.path());
  ASSERT_EQ(event_files_here.size(), 1u);
  const nlohmann::json events = dump_events(event_files_here[0])["files"][0];
  expect_clean_events(events);
  for (const char* tag : {"loss", "validation/accuracy", "validation/loss", "test_accuracy"}) {
    // One point per step, the first record's value at that step.
    std::map<int64_t, double> logged;
    for (const auto& record : records_in(dir.path() / "metrics.jsonl")) {
      if (record.contains(tag))
        logged.try_emplace(record["step"].get<int64_t>(), record[tag].get<double>());
    }
    const auto points = scalars_of(events, tag);
    ASSERT_EQ(points.size(), logged.size()) << tag;
    for (const auto& [step, value] : points) {
      ASSERT_TRUE(logged.contains(step)) << tag << " at step " << step;
      EXPECT_FLOAT_EQ(static_cast<float>(value), static_cast<float>(logged[step]));
    }
  }
  for (const char* tag : {"w", "b", "gradients_on_average/w", "gradients_on_average/b"}) {
    const auto histogram = last_histogram(events, tag);
    if (s.exact_cadence) {
      ASSERT_TRUE(histogram.has_value()) << tag;
      EXPECT_EQ(histogram->step, 200) << tag;
    } else if (histogram.has_value()) {  // async: only if the chief took a step past 100
      EXPECT_GE(histogram->step, 100) << tag;
    }
  }
  if (s.distributed) {
    for (const int worker : {0, 1}) {
      const std::string run = "worker_" + std::to_string(worker);
      const auto files = event_files(dir.path() / run);
      ASSERT_EQ(files.size(), 1u) << run;
      const nlohmann::json own = dump_events(files[0])["files"][0];
      expect_clean_events(own);
      // --log_every counts a worker's own steps, and under async a worker that starts late may
      // take fewer than 10 of the 240 global steps: then it has no step line to log.
      const auto local = first_match(
          r.out,
          fmt::format(R"(worker={}: training elapsed time: [0-9.]+ s \(([0-9]+) local steps)",
                      worker));
      ASSERT_TRUE(local.has_value()) << r.out;
      EXPECT_EQ(scalars_of(own, "loss").size(), static_cast<size_t>(std::stoll((*local)[1]) / 10))
          << run << "\n"
          << r.out;
    }
  }

  // `dtrain eval` of that checkpoint, with no other flag, gives the accuracy the run reported.
  const double reported = reported_accuracy(r.out, s.distributed);
  ASSERT_GT(reported, 0.8) << r.out;
  EXPECT_NEAR((*closing)["test_accuracy"].get<double>(), reported, 1e-4);
  const ProcessResult eval = run_dtrain({"eval", "--checkpoint", dir.path().string()});
  ASSERT_EQ(eval.exit_code, 0) << eval.err;
  EXPECT_NEAR(reported_accuracy(eval.out, false), reported, 0.003) << eval.out;
}

TEST_P(SharedFlags, TargetAccuracyStopsEveryWorkerEarly) {
  const ProcessResult r = run_dtrain(
      train({"--train_steps", "3000", "--eval_every", "60", "--target_accuracy", "0.85"}));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto reached = first_match(r.out, R"(target accuracy 0.85 reached at step ([0-9]+))");
  ASSERT_TRUE(reached.has_value()) << r.out;
  EXPECT_LT(std::stoll((*reached)[1]), 3000);
  EXPECT_THAT(r.out, Not(HasSubstr("not reached")));
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, SharedFlags,
    ::testing::Values(
        StrategyCase{"local", {"--strategy", "local"}, false, true},
        StrategyCase{"towers", {"--strategy", "towers", "--towers", "2"}, false, true},
        StrategyCase{"async", {"--strategy", "async", "--ps", "1", "--workers", "2"}, true, false},
        StrategyCase{"sync", {"--strategy", "sync", "--ps", "1", "--workers", "2"}, true, true},
        StrategyCase{"allreduce", {"--strategy", "allreduce", "--workers", "2"}, true, true}),
    [](const ::testing::TestParamInfo<StrategyCase>& info) { return info.param.name; });

}  // namespace
}  // namespace dtrain::testing
