// Training from the user's files, end to end on the real binary: MNIST converted to TFRecord
// (`dtrain convert`, both layouts) trains to exactly the parameters of the IDX files it came from;
// a CSV with a header and the label first trains, and a label column it lacks is named; streamed
// TFRecords train under all-reduce with the replicas equal; and `dtrain eval` finds the test files
// the run used by itself.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "data/dataset.h"
#include "support/checkpoints.h"
#include "support/process.h"
#include "support/temp_dir.h"
#include "support/text_match.h"

namespace dtrain::testing {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class DataFormatsTraining : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    for (const auto& [layout, compression] : {std::pair{"book", "gzip"}, std::pair{"tf", "none"}}) {
      const ProcessResult r = run_dtrain({"convert", "--data_dir", mnist_dir().string(), "--output",
                                          (dir_->path() / layout).string(), "--layout", layout,
                                          "--compression", compression});
      ASSERT_EQ(r.exit_code, 0) << r.err;
    }
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::filesystem::path records(const std::string& layout, const std::string& set) {
    return dir_->path() / layout / (set + (layout == "book" ? ".tfrecords.gz" : ".tfrecords"));
  }

  static inline TempDir* dir_ = nullptr;
  const std::vector<std::string> softmax_ = {
      "train", "--model", "softmax", "--threads", "1", "--log_every", "0", "--train_steps", "150"};
};

TEST_F(DataFormatsTraining, TfRecordsOfBothLayoutsTrainToTheParametersOfTheirIdxFiles) {
  TempDir idx_run, book_run, tf_run;
  ASSERT_EQ(run_dtrain(concat(softmax_, {"--train_dir", idx_run.path().string()})).exit_code, 0);
  for (const auto& [layout, run] : {std::pair{"book", &book_run}, std::pair{"tf", &tf_run}}) {
    const ProcessResult r = run_dtrain(
        concat(softmax_, {"--train_data", records(layout, "train").string(), "--test_data",
                          records(layout, "test").string(), "--train_dir", run->path().string()}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // The converter's train set is the IDX files' 55000 after the 5000 held out, in order, and a
    // user's files are trained on whole: the same batches, so the same parameters, bit for bit.
    const Checkpoint from_idx = newest_checkpoint(idx_run.path());
    const Checkpoint from_records = newest_checkpoint(run->path());
    EXPECT_EQ(max_abs_difference(from_idx, from_records, "w"), 0.0f) << layout;
    EXPECT_EQ(max_abs_difference(from_idx, from_records, "b"), 0.0f) << layout;
  }
}

TEST_F(DataFormatsTraining, EvalReadsTheTestFilesTheRunUsed) {
  TempDir run;
  const ProcessResult r = run_dtrain(
      concat(softmax_, {"--train_data", records("tf", "train").string(), "--test_data",
                        records("tf", "test").string(), "--train_dir", run.path().string()}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const ProcessResult eval = run_dtrain({"eval", "--checkpoint", run.path().string()});
  ASSERT_EQ(eval.exit_code, 0) << eval.err;
  EXPECT_THAT(eval.out, HasSubstr(records("tf", "test").string()));
  EXPECT_NEAR(test_accuracy_in(eval.out), test_accuracy_in(r.out), 1e-9) << eval.out;
}

TEST_F(DataFormatsTraining, ACsvWithAHeaderAndTheLabelFirstTrains) {
  // 3000 training and 1000 test examples of MNIST as text, label in the first column by name.
  const MnistData mnist = load_mnist(mnist_dir(), 0);
  auto write_csv = [&](const std::filesystem::path& path, const Dataset& d, int64_t n) {
    std::ofstream out(path);
    out << "digit";
    for (int64_t j = 0; j < d.example_size; ++j) out << ",px" << j;
    out << "\n";
    for (int64_t i = 0; i < n; ++i) {
      out << d.labels[static_cast<size_t>(i)];
      for (int64_t j = 0; j < d.example_size; ++j)
        out << fmt::format(",{}", d.images[static_cast<size_t>(i * d.example_size + j)]);
      out << "\n";
    }
  };
  TempDir csv;
  write_csv(csv.path() / "train.csv", mnist.train, 3000);
  write_csv(csv.path() / "test.csv", mnist.test, 1000);
  const ProcessResult r = run_dtrain(
      concat(softmax_, {"--train_data", (csv.path() / "train.csv").string(), "--test_data",
                        (csv.path() / "test.csv").string(), "--label_column", "digit"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GT(test_accuracy_in(r.out), 0.85) << r.out;
  EXPECT_THAT(r.out, HasSubstr("3000 training and 1000 test examples of 784 features"));

  // A label column the header does not have is named, with the file.
  const ProcessResult wrong = run_dtrain(
      concat(softmax_, {"--train_data", (csv.path() / "train.csv").string(), "--test_data",
                        (csv.path() / "test.csv").string(), "--label_column", "label"}));
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_THAT(wrong.err, HasSubstr("train.csv"));
  EXPECT_THAT(wrong.err, HasSubstr("label"));
  EXPECT_EQ(wrong.out, "") << "refused before training";
}

TEST_F(DataFormatsTraining, StreamedTfRecordsTrainUnderAllreduceWithEqualReplicas) {
  const ProcessResult r =
      run_dtrain(concat(softmax_, {"--strategy", "allreduce", "--workers", "2", "--train_data",
                                   records("book", "train").string(), "--test_data",
                                   records("book", "test").string(), "--shuffle_buffer", "5000"}));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("streamed through a shuffle buffer of 5000 examples"));
  std::vector<std::string> checksums;
  for (const Match& line :
       all_matches(r.out, R"(worker=[0-9]: parameters crc32c = (0x[0-9A-F]{8}))"))
    checksums.push_back(line[1]);
  ASSERT_EQ(checksums.size(), 2u) << r.out;
  EXPECT_EQ(checksums[0], checksums[1]);
  EXPECT_GT(test_accuracy_in(r.out, "worker=0: "), 0.85) << r.out;
}

}  // namespace
}  // namespace dtrain::testing
