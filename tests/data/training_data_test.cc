// load_training_data: MNIST from a folder by default, the user's files when both lists are given,
// the validation split, and one class count for all sets.
#include "data/training_data.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "base/error.h"
#include "support/idx_files.h"
#include "support/temp_dir.h"

namespace dtrain {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::idx_images;
using testing::idx_labels;
using testing::TempDir;
using ::testing::ThrowsMessage;
using testing::write_bytes;
using testing::write_idx_file;

void write_pair(const TempDir& dir, const std::string& prefix, uint32_t count,
                std::vector<uint32_t> example_dims = {28, 28}) {
  write_idx_file(dir / (prefix + "-images-idx3-ubyte.gz"), idx_images(count, example_dims));
  write_idx_file(dir / (prefix + "-labels-idx1-ubyte.gz"), idx_labels(count));
}

TEST(LoadTrainingData, ADataDirAloneLoadsMnistAsLoadMnistDoes) {
  TempDir dir;
  write_pair(dir, "train", 10);
  write_pair(dir, "t10k", 4);
  DataSpec spec;
  spec.data_dir = dir.path();
  spec.validation_size = 3;
  const TrainingData data = load_training_data(spec);
  EXPECT_EQ(data.train.size, 7);
  EXPECT_EQ(data.validation.size, 3);
  EXPECT_EQ(data.test.size, 4);
  EXPECT_EQ(data.train.num_classes, 10);
}

TEST(LoadTrainingData, UserFilesSplitTheFirstExamplesOffForValidation) {
  TempDir dir;
  write_pair(dir, "shapes-train", 8, {3, 5});
  write_pair(dir, "shapes-test", 3, {3, 5});
  DataSpec spec;
  spec.train_paths = (dir / "shapes-train-images-idx3-ubyte.gz").string();
  spec.test_paths = (dir / "shapes-test-*").string();
  spec.data_dir = dir / "not-read";
  spec.validation_size = 2;

  const TrainingData data = load_training_data(spec);

  EXPECT_THAT(data.validation.labels, ElementsAre(0, 1));
  EXPECT_THAT(data.train.labels, ElementsAre(2, 3, 4, 5, 6, 7));
  EXPECT_THAT(data.test.labels, ElementsAre(0, 1, 2));
  EXPECT_EQ(data.train.example_size, 15);
  EXPECT_EQ(data.validation.images.size(), 2u * 15);
  EXPECT_EQ(data.train.images[0], 2.0f / 255.0f);
  // The largest label of train and test, for all three sets.
  EXPECT_EQ(data.train.num_classes, 8);
  EXPECT_EQ(data.validation.num_classes, 8);
  EXPECT_EQ(data.test.num_classes, 8);
}

TEST(LoadTrainingData, ALabelColumnOfOneClassIsRefusedNamingTheColumnAndTheChoice) {
  // Kaggle's MNIST without a header name dtrain knows: the default takes the last pixel, 0 in
  // every row.
  TempDir dir;
  write_bytes(dir / "train.csv", "digit,pixel0,pixel1\n3,12,0\n5,200,0\n1,7,0\n");
  write_bytes(dir / "test.csv", "digit,pixel0,pixel1\n3,12,0\n");
  DataSpec spec;
  spec.train_paths = (dir / "train.csv").string();
  spec.test_paths = (dir / "test.csv").string();
  spec.validation_size = 0;
  EXPECT_THAT([&] { load_training_data(spec); },
              ThrowsMessage<DataError>(AllOf(HasSubstr("train.csv"),
                                             HasSubstr("column 2 ('pixel1'), the last column, by "
                                                       "default"),
                                             HasSubstr("one class only (0) in its 3 rows"),
                                             HasSubstr("--label_column"))));
  spec.options.label_column = "digit";
  EXPECT_THAT(load_training_data(spec).train.labels, ElementsAre(3, 5, 1));
}

TEST(LoadTrainingData, AFeatureScaleForPixelsIsRefusedNamingTheFiles) {
  TempDir dir;
  write_pair(dir, "shapes-train", 4, {2, 2});
  write_pair(dir, "shapes-test", 2, {2, 2});
  DataSpec spec;
  spec.train_paths = (dir / "shapes-train-images-idx3-ubyte.gz").string();
  spec.test_paths = (dir / "shapes-test-images-idx3-ubyte.gz").string();
  spec.validation_size = 0;
  spec.options.feature_scale = parse_feature_scale("1/255");
  EXPECT_THAT(
      [&] { load_training_data(spec); },
      ThrowsMessage<UsageError>(AllOf(HasSubstr("--feature_scale 1/255"),
                                      HasSubstr(spec.train_paths), HasSubstr("uint8 pixels"))));
  // MNIST from a folder is refused before it is read.
  DataSpec mnist;
  mnist.data_dir = dir / "no-mnist-here";
  mnist.options.feature_scale = parse_feature_scale("0.5");
  EXPECT_THAT([&] { load_training_data(mnist); },
              ThrowsMessage<UsageError>(HasSubstr("--feature_scale 0.5: MNIST in")));
}

TEST(LoadTrainingData, ZeroValidationSizeKeepsEveryTrainingExample) {
  TempDir dir;
  write_pair(dir, "a-train", 5);
  write_pair(dir, "a-test", 2);
  DataSpec spec;
  spec.train_paths = (dir / "a-train-labels-idx1-ubyte.gz").string();
  spec.test_paths = (dir / "a-test-images-idx3-ubyte.gz").string();
  spec.validation_size = 0;
  const TrainingData data = load_training_data(spec);
  EXPECT_EQ(data.train.size, 5);
  EXPECT_EQ(data.validation.size, 0);
}

TEST(LoadTrainingData, TrainFilesWithoutTestFilesAreAUsageError) {
  DataSpec spec;
  spec.train_paths = "a.csv";
  EXPECT_THAT(
      [&] { load_training_data(spec); },
      ::testing::ThrowsMessage<UsageError>(HasSubstr("--train_data is given without --test_data")));
}

TEST(LoadTrainingData, TrainAndTestOfDifferentFeatureCountsAreNamed) {
  TempDir dir;
  write_pair(dir, "a-train", 5, {4});
  write_pair(dir, "a-test", 2, {5});
  DataSpec spec;
  spec.train_paths = (dir / "a-train-images-idx3-ubyte.gz").string();
  spec.test_paths = (dir / "a-test-images-idx3-ubyte.gz").string();
  spec.validation_size = 0;
  EXPECT_THAT([&] { load_training_data(spec); },
              ::testing::ThrowsMessage<DataError>(HasSubstr("has 4 features per example but")));
}

TEST(LoadTrainingData, ValidationSizeOfAllTrainingExamplesIsAUsageError) {
  TempDir dir;
  write_pair(dir, "a-train", 5);
  write_pair(dir, "a-test", 2);
  DataSpec spec;
  spec.train_paths = (dir / "a-train-images-idx3-ubyte.gz").string();
  spec.test_paths = (dir / "a-test-images-idx3-ubyte.gz").string();
  spec.validation_size = 5;
  EXPECT_THAT([&] { load_training_data(spec); },
              ::testing::ThrowsMessage<UsageError>(
                  HasSubstr("--validation_size 5: must be less than the 5 training examples")));
}

}  // namespace
}  // namespace dtrain
