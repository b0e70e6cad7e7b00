// A user's own CSV files end to end, read the way the user meant: Kaggle's layout (the label first,
// under a header that names it) with raw 0-255 features and --feature_scale; `dtrain eval` of the
// checkpoint from another folder; `dtrain predict` on features without a label column. Tiny files
// (tens of rows of four features) and a one-layer model keep each run short.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "export/csv_table.h"
#include "support/process.h"
#include "support/temp_dir.h"
#include "support/text_match.h"

namespace dtrain::testing {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kModel = R"({"class_name": "Sequential", "config": {"name": "tiny",
  "layers": [{"class_name": "InputLayer", "config": {"batch_input_shape": [null, 4], "name": "in"}},
             {"class_name": "Dense", "config": {"name": "out", "units": 3}}]}})";

// Row i: class i % 3, two features that tell the classes apart on 0-255, one of noise, and a last
// one that is 0 in every row (as MNIST's last pixel is), which the default label column would take.
std::string csv_rows(int count, bool with_label, uint32_t seed) {
  std::string rows;
  for (int i = 0; i < count; ++i) {
    seed = seed * 1664525u + 1013904223u;
    const int label = i % 3;
    const int noise = static_cast<int>(seed >> 24) % 30;
    if (with_label) rows += fmt::format("{},", label);
    rows += fmt::format("{},{},{},0\n", 30 + 90 * label + noise, 230 - 90 * label - noise,
                        static_cast<int>(seed >> 16) % 256);
  }
  return rows;
}

// Writes the Kaggle-layout train.csv and test.csv and the model into dir.
void write_run_files(const std::filesystem::path& dir) {
  write_bytes(dir / "train.csv", "label,f0,f1,f2,f3\n" + csv_rows(90, true, 1));
  write_bytes(dir / "test.csv", "label,f0,f1,f2,f3\n" + csv_rows(30, true, 2));
  write_bytes(dir / "model.json", kModel);
}

// dtrain run in folder `cwd`, as a user's shell there would run it.
ProcessResult run_dtrain_in(const std::filesystem::path& cwd, std::vector<std::string> args) {
  args.insert(args.begin(), {"env", "-C", cwd.string(), DTRAIN_BINARY});
  return run_command(args);
}

// Trains from inside data/ with relative paths, into run/.
ProcessResult train_in(const TempDir& work) {
  std::vector<std::string> args = {"train",        "--model",         "model.json",
                                   "--train_data", "train.csv",       "--test_data",
                                   "test.csv",     "--feature_scale", "1/255"};
  for (const char* flag : {"--train_steps=150", "--batch_size=10", "--learning_rate=0.05",
                           "--log_every=0", "--threads=1"}) {
    args.push_back(flag);
  }
  args.push_back("--train_dir=" + (work / "run").string());
  return run_dtrain_in(work / "data", args);
}

double test_accuracy(const std::string& out) {
  const auto match = first_match(out, R"(test accuracy = ([0-9.]+))");
  return match ? std::stod((*match)[1]) : -1;
}

TEST(UserData, AKaggleLayoutCsvTrainsOnItsLabelHeaderAndTheDataLineSaysSo) {
  TempDir work;
  std::filesystem::create_directories(work / "data");
  write_run_files(work / "data");
  const ProcessResult trained = train_in(work);
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  EXPECT_THAT(trained.out, HasSubstr("labels column 0 ('label'), by its header name 'label'; "
                                     "numeric features × 1/255"));
  // The last column, 0 in every row, would have scored 1.0 on one class.
  EXPECT_GE(test_accuracy(trained.out), 0.9) << trained.out;
}

TEST(UserData, EvalFromAnotherFolderFindsTheRunsFilesAndNamesTestDataWhenTheyAreGone) {
  TempDir work;
  std::filesystem::create_directories(work / "data");
  std::filesystem::create_directories(work / "elsewhere");
  write_run_files(work / "data");
  const ProcessResult trained = train_in(work);
  ASSERT_EQ(trained.exit_code, 0) << trained.err;

  const std::string checkpoint = (work / "run").string();
  const ProcessResult eval =
      run_dtrain_in(work / "elsewhere", {"eval", "--checkpoint", checkpoint});
  ASSERT_EQ(eval.exit_code, 0) << eval.err;
  EXPECT_THAT(eval.out, HasSubstr((work / "data" / "test.csv").string()));
  EXPECT_NEAR(test_accuracy(eval.out), test_accuracy(trained.out), 1e-9) << eval.out;

  std::filesystem::remove(work / "data" / "test.csv");
  const ProcessResult gone =
      run_dtrain_in(work / "elsewhere", {"eval", "--checkpoint", checkpoint});
  EXPECT_NE(gone.exit_code, 0);
  EXPECT_THAT(gone.err, AllOf(HasSubstr((work / "data" / "test.csv").string() + ": no such file"),
                              HasSubstr("pass --test_data")));
}

TEST(UserData, PredictReadsFeaturesWithoutALabelColumnAndPrintsNoLabelOrAccuracy) {
  TempDir work;
  std::filesystem::create_directories(work / "data");
  write_run_files(work / "data");
  const ProcessResult trained = train_in(work);
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  const std::string checkpoint = (work / "run").string();
  // The test rows with their labels, and the same features alone: under a header with no label
  // name, and headerless with --label_column none.
  write_bytes(work / "features.csv", "f0,f1,f2,f3\n" + csv_rows(30, false, 2));
  write_bytes(work / "bare.csv", csv_rows(30, false, 2));

  const ProcessResult labelled = run_dtrain(
      {"predict", "--checkpoint", checkpoint, "--input", (work / "data" / "test.csv").string()});
  ASSERT_EQ(labelled.exit_code, 0) << labelled.err;
  const ProcessResult features = run_dtrain(
      {"predict", "--checkpoint", checkpoint, "--input", (work / "features.csv").string()});
  ASSERT_EQ(features.exit_code, 0) << features.err;
  const ProcessResult bare = run_dtrain({"predict", "--checkpoint", checkpoint, "--input",
                                         (work / "bare.csv").string(), "--label_column", "none"});
  ASSERT_EQ(bare.exit_code, 0) << bare.err;

  const CsvTable with_labels = parse_csv_table(labelled.out);
  const CsvTable without = parse_csv_table(features.out);
  EXPECT_THAT(without.header, ElementsAre("index", "class", "prob_0", "prob_1", "prob_2"));
  ASSERT_EQ(without.rows.size(), 30u);
  for (size_t row = 0; row < 30; ++row) {
    EXPECT_EQ(without.at(row, "class"), with_labels.at(row, "class")) << row;
    EXPECT_EQ(without.at(row, "prob_1"), with_labels.at(row, "prob_1")) << row;
  }
  EXPECT_EQ(bare.out, features.out);
  EXPECT_THAT(labelled.err, HasSubstr("accuracy = "));
  EXPECT_THAT(features.err,
              AllOf(HasSubstr("30 records"), HasSubstr("no labels"), Not(HasSubstr("accuracy"))));
}

// A binary head (Dense(1, sigmoid)) exports with its sigmoid, and the export says so: its output is
// the probability, not logits.
TEST(UserData, TheExportOfASigmoidHeadSaysItOutputsTheProbability) {
  TempDir work;
  std::filesystem::create_directories(work / "data");
  std::string rows = "label,f0,f1,f2,f3\n";
  for (int i = 0; i < 40; ++i) rows += fmt::format("{},{},{},7,0\n", i % 2, 40 + 150 * (i % 2), i);
  write_bytes(work / "data" / "train.csv", rows);
  write_bytes(work / "data" / "test.csv", rows);
  write_bytes(work / "data" / "model.json", R"({"class_name": "Sequential", "config": {"name":
    "binary", "layers": [{"class_name": "InputLayer", "config": {"batch_input_shape": [null, 4],
    "name": "in"}}, {"class_name": "Dense", "config": {"name": "out", "units": 1,
    "activation": "sigmoid"}}]}})");
  const ProcessResult trained =
      run_dtrain_in(work / "data", {"train", "--model", "model.json", "--train_data", "train.csv",
                                    "--test_data", "test.csv", "--feature_scale", "1/255",
                                    "--train_steps", "5", "--batch_size", "10", "--log_every", "0",
                                    "--threads", "1", "--train_dir", (work / "run").string()});
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  const std::string model = (work / "model.onnx").string();
  const ProcessResult exported =
      run_dtrain({"export", "--checkpoint", (work / "run").string(), "--output", model});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_THAT(exported.out, HasSubstr("input [batch,4] -> probability [batch,1]"));
  EXPECT_THAT(exported.out, Not(HasSubstr("logits")));
}

}  // namespace
}  // namespace dtrain::testing
