// `dtrain predict`: per-record classes and probabilities as CSV from any data format dtrain trains
// on, agreeing with dtrain eval, and refusing input of the wrong width by name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "data/dataset.h"
#include "export/csv_table.h"
#include "support/idx_files.h"
#include "support/process.h"
#include "support/temp_dir.h"
#include "support/text_match.h"

namespace dtrain::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// One short training run shared by the tests of this suite.
class Predict : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    work_ = new TempDir;
    const ProcessResult trained =
        run_dtrain({"train", "--model", "softmax", "--train_steps", "200", "--log_every", "0",
                    "--threads", "1", "--train_dir", train_dir().string()});
    ASSERT_EQ(trained.exit_code, 0) << trained.err;
  }
  static void TearDownTestSuite() {
    delete work_;
    work_ = nullptr;
  }
  static std::filesystem::path train_dir() { return work_->path() / "train"; }
  static std::string test_images() { return (mnist_dir() / "t10k-images-idx3-ubyte").string(); }

  static TempDir* work_;
};

TempDir* Predict::work_ = nullptr;

TEST_F(Predict, ProbabilitiesSumToOneAndTheClassIsTheLargest) {
  const ProcessResult r =
      run_dtrain({"predict", "--checkpoint", train_dir().string(), "--input", test_images()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const CsvTable table = parse_csv_table(r.out);
  EXPECT_THAT(table.header,
              ElementsAre("index", "label", "class", "prob_0", "prob_1", "prob_2", "prob_3",
                          "prob_4", "prob_5", "prob_6", "prob_7", "prob_8", "prob_9"));
  ASSERT_EQ(table.rows.size(), 10000u);
  for (size_t row = 0; row < table.rows.size(); ++row) {
    ASSERT_EQ(table.at(row, "index"), static_cast<double>(row));
    double sum = 0;
    int best = 0;
    for (int k = 0; k < 10; ++k) {
      const double p = table.at(row, "prob_" + std::to_string(k));
      ASSERT_GE(p, 0.0);
      sum += p;
      if (p > table.at(row, "prob_" + std::to_string(best))) best = k;
    }
    ASSERT_NEAR(sum, 1.0, 1e-6) << "row " << row;
    ASSERT_EQ(table.at(row, "class"), best) << "row " << row;
  }
  // The first test image is a 7.
  EXPECT_EQ(table.at(0, "label"), 7);
}

TEST_F(Predict, ItsAccuracyIsDtrainEvals) {
  const ProcessResult eval = run_dtrain({"eval", "--checkpoint", train_dir().string()});
  ASSERT_EQ(eval.exit_code, 0) << eval.err;
  const std::string output = (work_->path() / "predictions.csv").string();
  const ProcessResult predict = run_dtrain({"predict", "--checkpoint", train_dir().string(),
                                            "--input", test_images(), "--output", output});
  ASSERT_EQ(predict.exit_code, 0) << predict.err;
  EXPECT_EQ(predict.out, "");  // the CSV went to the file
  EXPECT_THAT(predict.err, HasSubstr("10000 records"));
  const double eval_accuracy = number_in(eval.out, R"(test accuracy = ([0-9.]+))");
  EXPECT_GT(eval_accuracy, 0.85);
  EXPECT_EQ(number_in(predict.err, R"(accuracy = ([0-9.]+))"), eval_accuracy) << predict.err;
  // The same count from the file's own rows.
  const CsvTable table = read_csv_table(output);
  int correct = 0;
  for (size_t row = 0; row < table.rows.size(); ++row)
    correct += table.at(row, "class") == table.at(row, "label");
  EXPECT_NEAR(correct / 10000.0, eval_accuracy, 0.00005);
}

TEST_F(Predict, ReadsTfRecordFilesAsItReadsIdx) {
  const std::filesystem::path converted = work_->path() / "tfrecords";
  const ProcessResult convert = run_dtrain(
      {"convert", "--output", converted.string(), "--compression", "gzip", "--layout", "tf"});
  ASSERT_EQ(convert.exit_code, 0) << convert.err;
  const ProcessResult from_tfrecord =
      run_dtrain({"predict", "--checkpoint", train_dir().string(), "--input",
                  (converted / "test.tfrecords.gz").string()});
  ASSERT_EQ(from_tfrecord.exit_code, 0) << from_tfrecord.err;
  const ProcessResult from_idx =
      run_dtrain({"predict", "--checkpoint", train_dir().string(), "--input", test_images()});
  ASSERT_EQ(from_idx.exit_code, 0) << from_idx.err;
  // The same pixels, labels and order: the same CSV to the last digit.
  EXPECT_EQ(parse_csv_table(from_tfrecord.out).rows.size(), 10000u);
  EXPECT_EQ(from_tfrecord.out, from_idx.out);
}

TEST_F(Predict, AnInputOfTheWrongWidthIsRefusedNamingTheFile) {
  const std::filesystem::path images = work_->path() / "small-images-idx3-ubyte";
  write_idx_file(images, idx_images(3, {5, 5}));
  write_idx_file(work_->path() / "small-labels-idx1-ubyte", idx_labels(3));
  const ProcessResult r =
      run_dtrain({"predict", "--checkpoint", train_dir().string(), "--input", images.string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(images.string()));
  EXPECT_THAT(r.err, HasSubstr("3 records of 25 values"));
  EXPECT_THAT(r.err, HasSubstr("takes 784 values"));
  EXPECT_EQ(r.out, "");
}

TEST_F(Predict, ReadsCsvWithTheLabelColumnNamedByTheSharedDataFlags) {
  // The first 50 test images as CSV, the label first under a header, which --label_column names.
  const Dataset test = load_mnist(mnist_dir(), 0).test;
  std::string csv = "digit";
  for (int i = 0; i < 784; ++i) csv += ",p" + std::to_string(i);
  csv += "\n";
  for (int row = 0; row < 50; ++row) {
    csv += std::to_string(test.labels[row]);
    for (int i = 0; i < 784; ++i) {
      char value[32];
      std::snprintf(value, sizeof value, ",%.9g", test.images[row * 784 + i]);
      csv += value;
    }
    csv += "\n";
  }
  const std::filesystem::path input = work_->path() / "first50.csv";
  write_bytes(input, csv);

  const ProcessResult from_csv =
      run_dtrain({"predict", "--checkpoint", train_dir().string(), "--input", input.string(),
                  "--label_column", "digit", "--logits"});
  ASSERT_EQ(from_csv.exit_code, 0) << from_csv.err;
  const ProcessResult from_idx = run_dtrain(
      {"predict", "--checkpoint", train_dir().string(), "--input", test_images(), "--logits"});
  ASSERT_EQ(from_idx.exit_code, 0) << from_idx.err;

  const CsvTable a = parse_csv_table(from_csv.out);
  const CsvTable b = parse_csv_table(from_idx.out);
  ASSERT_EQ(a.rows.size(), 50u);
  EXPECT_EQ(a.header.size(), 3u + 10u + 10u);
  for (size_t row = 0; row < 50; ++row) {
    EXPECT_EQ(a.at(row, "label"), b.at(row, "label")) << row;
    EXPECT_EQ(a.at(row, "class"), b.at(row, "class")) << row;
    for (int k = 0; k < 10; ++k) {
      const std::string logit = "logit_" + std::to_string(k);
      EXPECT_NEAR(a.at(row, logit), b.at(row, logit), 1e-5) << row;
    }
  }
  EXPECT_THAT(from_csv.err, HasSubstr("50 records"));

  // Without the flag the label is the last column, pixel 783, which is blank in every MNIST image
  // (and the same width of input, the digit now being a feature): the flag did its work.
  const ProcessResult without =
      run_dtrain({"predict", "--checkpoint", train_dir().string(), "--input", input.string()});
  ASSERT_EQ(without.exit_code, 0) << without.err;
  const CsvTable c = parse_csv_table(without.out);
  ASSERT_EQ(c.rows.size(), 50u);
  for (size_t row = 0; row < 50; ++row) EXPECT_EQ(c.at(row, "label"), 0) << row;
  EXPECT_EQ(a.at(0, "label"), 7);
}

}  // namespace
}  // namespace dtrain::testing
