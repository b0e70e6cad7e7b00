// The dtrain binary end to end: real MNIST training, its output lines and files, and one clear
// error line with exit code 2 for every bad flag value.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <variant>

#include "base/cpu.h"
#include "plan/flags.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace dtrain::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

double last_test_accuracy(const std::string& out) {
  const std::string key = "test accuracy = ";
  const size_t at = out.rfind(key);
  if (at == std::string::npos) return -1;
  return std::stod(out.substr(at + key.size()));
}

TEST(TrainCliTest, SoftmaxTrainsToTutorialAccuracyInOneEpoch) {
  ProcessResult r =
      run_dtrain({"train", "--model", "softmax", "--epochs", "1", "--log_every", "100"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GE(last_test_accuracy(r.out), 0.90) << r.out;
  // Step lines in the tutorials' shape, one per 100 steps of the 550.
  EXPECT_EQ(count_lines_containing(r.out, "examples/sec; "), 5) << r.out;
  EXPECT_THAT(r.out, HasSubstr("step 100, loss = "));
  EXPECT_THAT(r.out, HasSubstr("Training elapsed time: "));
}

TEST(TrainCliTest, TargetAccuracyStopsEarlyAndMetricsRecordTrainingSeconds) {
  TempDir dir;
  ProcessResult r = run_dtrain({"train", "--model", "softmax", "--epochs", "3", "--eval_every",
                                "50", "--target_accuracy", "0.88", "--train_dir",
                                dir.path().string(), "--log_every", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("target accuracy 0.88 reached at step"));
  std::ifstream metrics(dir.path() / "metrics.jsonl");
  ASSERT_TRUE(metrics.good());
  std::vector<nlohmann::json> records;
  for (std::string line; std::getline(metrics, line);) {
    nlohmann::json record = nlohmann::json::parse(line);
    if (!record.contains("start")) records.push_back(std::move(record));
  }
  ASSERT_GE(records.size(), 2u);
  double previous = 0;
  for (size_t i = 0; i + 1 < records.size(); ++i) {
    EXPECT_EQ(records[i]["step"].get<int64_t>(), 50 * static_cast<int64_t>(i + 1));
    EXPECT_GE(records[i]["train_seconds"].get<double>(), previous);
    previous = records[i]["train_seconds"].get<double>();
  }
  // It stopped at the first evaluation of the validation set that reached the target, long
  // before 3 epochs (1650 steps).
  const auto& stop = records[records.size() - 2];
  EXPECT_GE(stop["validation/accuracy"].get<double>(), 0.88);
  EXPECT_LT(stop["step"].get<int64_t>(), 1650);
  for (size_t i = 0; i + 2 < records.size(); ++i)
    EXPECT_LT(records[i]["validation/accuracy"].get<double>(), 0.88);
  EXPECT_TRUE(records.back().contains("test_accuracy"));
}

TEST(TrainCliTest, TowersStrategyTrainsAndSaysSo) {
  ProcessResult r = run_dtrain({"train", "--model", "softmax", "--strategy", "towers", "--towers",
                                "2", "--train_steps", "300", "--log_every", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("strategy towers"));
  EXPECT_GE(last_test_accuracy(r.out), 0.88);
}

TEST(TrainCliTest, EvalPrintsTheAccuracyOfTheSavedCheckpoint) {
  TempDir dir;
  ProcessResult train = run_dtrain({"train", "--model", "softmax", "--train_steps", "200",
                                    "--train_dir", dir.path().string(), "--log_every", "0"});
  ASSERT_EQ(train.exit_code, 0) << train.err;
  ProcessResult eval =
      run_dtrain({"eval", "--checkpoint", (dir.path() / "model.ckpt-200.safetensors").string()});
  ASSERT_EQ(eval.exit_code, 0) << eval.err;
  // softmax's recipe evaluates on the moving average, and eval follows the checkpoint's record.
  EXPECT_THAT(eval.out, HasSubstr("(moving average)"));
  EXPECT_NEAR(last_test_accuracy(eval.out), last_test_accuracy(train.out), 1e-9);

  ProcessResult raw = run_dtrain({"eval", "--raw_weights", "--checkpoint", dir.path().string()});
  ASSERT_EQ(raw.exit_code, 0) << raw.err;
  EXPECT_THAT(raw.out, Not(HasSubstr("(moving average)")));
  EXPECT_GE(last_test_accuracy(raw.out), 0.85);
}

TEST(TrainCliTest, EvalOfMovingAveragesACheckpointLacksNamesTheFile) {
  TempDir dir;
  ProcessResult train =
      run_dtrain({"train", "--model", "softmax", "--train_steps", "20", "--moving_average_decay",
                  "0", "--train_dir", dir.path().string(), "--log_every", "0"});
  ASSERT_EQ(train.exit_code, 0) << train.err;
  const std::string file = (dir.path() / "model.ckpt-20.safetensors").string();
  ProcessResult eval = run_dtrain({"eval", "--moving_average", "--checkpoint", file});
  EXPECT_EQ(eval.exit_code, 1);
  EXPECT_THAT(eval.err, HasSubstr(file));
  EXPECT_THAT(eval.err, HasSubstr("no moving averages"));
  // Without the flag the same checkpoint evaluates its raw weights.
  ProcessResult raw = run_dtrain({"eval", "--checkpoint", file});
  ASSERT_EQ(raw.exit_code, 0) << raw.err;
  EXPECT_THAT(raw.out, Not(HasSubstr("(moving average)")));
}

// The version CMakeLists.txt's project() declares, read from the file itself.
std::string declared_version() {
  std::ifstream file(std::string(DTRAIN_SOURCE_DIR) + "/CMakeLists.txt");
  std::stringstream text;
  text << file.rdbuf();
  std::smatch match;
  const std::string cmake = text.str();
  if (!std::regex_search(cmake, match, std::regex(R"(project\(dtrain VERSION ([0-9.]+))")))
    return "";
  return match[1];
}

// The source's commit as git itself says it; "" where there is no git or no checkout.
std::string source_commit() {
  try {
    ProcessResult head =
        run_command({"git", "-C", DTRAIN_SOURCE_DIR, "rev-parse", "--short=12", "HEAD"});
    if (head.exit_code != 0 || head.out.empty()) return "";
    return head.out.substr(0, head.out.find('\n'));
  } catch (const std::runtime_error&) {
    return "";  // git is not installed
  }
}

TEST(TrainCliTest, VersionSaysTheProjectVersionAndTheCommitOfTheSource) {
  const std::string version = declared_version();
  ASSERT_FALSE(version.empty());
  const std::string commit = source_commit();
  const std::string expected =
      "dtrain " + version + (commit.empty() ? "" : " (commit " + commit + ")") + "\n";
  for (const char* spelling : {"--version", "version"}) {
    ProcessResult r = run_dtrain({spelling});
    EXPECT_EQ(r.exit_code, 0) << spelling << ": " << r.err;
    EXPECT_EQ(r.out, expected) << spelling;
    EXPECT_EQ(r.err, "") << spelling;
  }
}

// --help's flags, each with the headings it appears under: a heading is an unindented line ending
// in ':', a flag a line "  --name ...".
std::map<std::string, std::vector<std::string>> help_headings(const std::string& help) {
  std::map<std::string, std::vector<std::string>> headings;
  std::string heading;
  std::istringstream lines(help);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line.front() != ' ' && line.back() == ':') {
      heading = line.substr(0, line.size() - 1);
    } else if (line.starts_with("  --")) {
      headings[line.substr(2, line.find(' ', 2) - 2)].push_back(heading);
    }
  }
  return headings;
}

TEST(TrainCliTest, HelpShowsEveryFlagOnceUnderItsTopicWithoutCli11Internals) {
  const std::vector<std::string> data_flags = {"--data_format",   "--compression",
                                               "--image_feature", "--label_feature",
                                               "--label_column",  "--feature_scale"};
  for (const char* command : {"train", "task"}) {
    ProcessResult r = run_dtrain({command, "--help"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const char* internal : {"ENUM:", "{false}", "Excludes:", "->", " OR "})
      EXPECT_THAT(r.out, Not(HasSubstr(internal))) << command;
    const auto headings = help_headings(r.out);
    for (const FlagSpec& flag : flag_table()) {
      const std::string name(flag.name);
      if (flag.hidden) {
        EXPECT_EQ(headings.count(name), 0u) << name;
        continue;
      }
      const bool data = std::holds_alternative<std::monostate>(flag.field);
      for (const std::string& shown : data ? data_flags : std::vector<std::string>{name}) {
        ASSERT_EQ(headings.count(shown), 1u) << command << " --help lacks " << shown;
        EXPECT_EQ(headings.at(shown), std::vector<std::string>{std::string(flag.topic)})
            << command << " " << shown;
      }
    }
  }
}

TEST(TrainCliTest, EvalHelpSaysWhichFlagsExcludeEachOtherInWords) {
  ProcessResult r = run_dtrain({"eval", "--help"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("(not with --moving_average)"));
  for (const char* internal : {"ENUM:", "{false}", "Excludes:", "->", " OR "})
    EXPECT_THAT(r.out, Not(HasSubstr(internal)));
}

TEST(TrainCliTest, ThreadsBeyondTheCoresAreSaidOnce) {
  const std::string threads = std::to_string(available_cores() + 1);
  ProcessResult r = run_dtrain({"train", "--model", "softmax", "--train_steps", "2", "--threads",
                                threads, "--log_every", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count_lines_containing(r.out, "--threads " + threads + " is more than the "), 1)
      << r.out;
  // Within the cores: not a word.
  ProcessResult within = run_dtrain(
      {"train", "--model", "softmax", "--train_steps", "2", "--threads", "1", "--log_every", "0"});
  ASSERT_EQ(within.exit_code, 0) << within.err;
  EXPECT_THAT(within.out, Not(HasSubstr("is more than the")));
}

// The local launcher's tasks say nothing of what the launcher decided for them: their places
// (the launcher names every task's), a --resume the user never gave, or --threads beyond the
// cores (the launcher says it once, for all the workers).
TEST(TrainCliTest, ALocalClustersTasksSayNothingTheUserDidNotAskAbout) {
  TempDir dir;
  const std::string threads = std::to_string(available_cores());
  ProcessResult r = run_dtrain({"train", "--model", "softmax", "--strategy", "async", "--ps", "1",
                                "--workers", "2", "--train_steps", "4", "--threads", threads,
                                "--train_dir", dir.path().string(), "--log_every", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string all = r.out + r.err;
  EXPECT_THAT(all, Not(HasSubstr("--resume"))) << all;
  EXPECT_THAT(all, Not(HasSubstr("--ps_hosts"))) << all;
  EXPECT_THAT(all, Not(HasSubstr("--worker_hosts"))) << all;
  EXPECT_EQ(count_lines_containing(all, "--threads " + threads + " for each of 2 workers is more"),
            1)
      << all;
  // Said where the user did give --resume, once, by the launcher.
  TempDir fresh;
  ProcessResult resumed =
      run_dtrain({"train", "--model", "softmax", "--strategy", "async", "--train_steps", "4",
                  "--train_dir", fresh.path().string(), "--resume", "--log_every", "0"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(count_lines_containing(resumed.out + resumed.err, "--resume: no checkpoint"), 1)
      << resumed.out << resumed.err;
}

struct BadFlag {
  std::vector<std::string> args;
  std::string culprit;
};

// Names each case after its flags so a failure reads "Flags/BadFlagTest.../batch_size_0".
std::string flag_case_name(const ::testing::TestParamInfo<BadFlag>& info) {
  std::string name;
  for (const std::string& arg : info.param.args) {
    for (char c : arg) {
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '_')
        name += c;
      else if (c == '-' && !name.empty() && name.back() != '_')
        name += '_';
    }
    name += '_';
  }
  while (!name.empty() && name.back() == '_') name.pop_back();
  return name;
}

void PrintTo(const BadFlag& flag, std::ostream* os) {
  for (const std::string& arg : flag.args) *os << arg << ' ';
}

class BadFlagTest : public ::testing::TestWithParam<BadFlag> {};

TEST_P(BadFlagTest, GivesOneClearLineAndExitCode2) {
  std::vector<std::string> args = {"train"};
  args.insert(args.end(), GetParam().args.begin(), GetParam().args.end());
  ProcessResult r = run_dtrain(args);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_EQ(count_lines_containing(r.err, ""), 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr(GetParam().culprit));
  EXPECT_THAT(r.out, Not(HasSubstr("step ")));
}

INSTANTIATE_TEST_SUITE_P(
    Flags, BadFlagTest,
    ::testing::Values(
        // The wiring of argv to the plan: a value CLI11 cannot parse, one outside the table's
        // choices, one the table's check refuses, a refusal under the strategy, an unknown flag.
        // Every other value's check: tests/plan/flags_test.cc, in process.
        BadFlag{{"--batch_size", "abc"}, "--batch_size"},
        BadFlag{{"--strategy", "magic"}, "--strategy"},
        BadFlag{{"--batch_size", "0"}, "--batch_size 0"},
        BadFlag{{"--towers", "2"}, "--strategy towers"},
        BadFlag{{"--no_such_flag"}, "--no_such_flag: no such flag (see dtrain train --help)"},
        // An unknown flag close to a known one asks whether that was meant.
        BadFlag{{"--lr", "0.1"}, "--lr: no such flag; did you mean --learning_rate?"},
        BadFlag{{"--train-steps=5"}, "--train-steps: no such flag; did you mean --train_steps?"},
        BadFlag{{"--batch-size", "10"}, "did you mean --batch_size?"}),
    flag_case_name);

TEST(TrainCliTest, AMistypedCommandAsksWhetherTheNearestWasMeant) {
  ProcessResult r = run_dtrain({"trian", "--model", "softmax"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err,
            "dtrain: error: trian: no such command; did you mean train? (see dtrain --help)\n");
  // Eval's own flags are the ones it suggests from.
  ProcessResult eval = run_dtrain({"eval", "--checkpiont", "x"});
  EXPECT_EQ(eval.exit_code, 2) << eval.err;
  EXPECT_THAT(eval.err, HasSubstr("--checkpiont: no such flag; did you mean --checkpoint?"));
}

}  // namespace
}  // namespace dtrain::testing
