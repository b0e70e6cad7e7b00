// expand_data_paths, idx_pair_of, open_example_reader and load_examples: how a list of
// files and patterns becomes readers and a Dataset, and how each mistake is named.
#include "data/data_files.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "base/error.h"
#include "data/example_files.h"
#include "data/tf_example.h"
#include "data/tfrecord.h"
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

TEST(ExpandDataPaths, PatternsGiveTheirMatchesSortedAndItemsKeepTheirOrder) {
  TempDir dir;
  for (const char* name : {"part-2.csv", "part-10.csv", "part-1.csv", "extra.csv", "notes.txt"}) {
    write_bytes(dir / name, "x\n");
  }
  const std::vector<std::filesystem::path> paths =
      expand_data_paths((dir / "extra.csv").string() + ", " + (dir / "part-*.csv").string() + "," +
                        (dir / "part-1.csv").string());
  EXPECT_THAT(paths, ElementsAre(dir / "extra.csv", dir / "part-1.csv", dir / "part-10.csv",
                                 dir / "part-2.csv"));
}

TEST(ExpandDataPaths, APatternMatchingNothingIsAUsageErrorNamingIt) {
  TempDir dir;
  const std::string pattern = (dir / "*.tfrecord").string();
  EXPECT_THAT([&] { expand_data_paths(pattern); },
              ::testing::ThrowsMessage<UsageError>(
                  HasSubstr("data path pattern '" + pattern + "' matches no file")));
}

TEST(ExpandDataPaths, AMissingFileIsADataErrorNamingIt) {
  TempDir dir;
  write_bytes(dir / "a.csv", "x\n");
  EXPECT_THAT(
      [&] { expand_data_paths((dir / "a.csv").string() + "," + (dir / "b.csv").string()); },
      ::testing::ThrowsMessage<DataError>(HasSubstr((dir / "b.csv").string() + ": no such file")));
}

TEST(ExpandDataPaths, AnEmptyItemIsAUsageError) {
  EXPECT_THAT(
      [&] { expand_data_paths("a.csv,,b.csv"); },
      ::testing::ThrowsMessage<UsageError>(HasSubstr("data paths 'a.csv,,b.csv': an empty item")));
  EXPECT_THROW(expand_data_paths(""), UsageError);
}

TEST(IdxPairOf, EitherFileOfAPairGivesThePair) {
  TempDir dir;
  write_idx_file(dir / "train-images-idx3-ubyte.gz", idx_images(2));
  write_idx_file(dir / "train-labels-idx1-ubyte.gz", idx_labels(2));
  write_idx_file(dir / "emnist-letters-test-images-idx3-ubyte", idx_images(2));
  write_idx_file(dir / "emnist-letters-test-labels-idx1-ubyte", idx_labels(2));

  for (const char* given : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"}) {
    const IdxFilePair pair = idx_pair_of(dir / given);
    EXPECT_EQ(pair.images, dir / "train-images-idx3-ubyte.gz") << given;
    EXPECT_EQ(pair.labels, dir / "train-labels-idx1-ubyte.gz") << given;
  }
  const IdxFilePair emnist = idx_pair_of(dir / "emnist-letters-test-labels-idx1-ubyte");
  EXPECT_EQ(emnist.images, dir / "emnist-letters-test-images-idx3-ubyte");
}

TEST(IdxPairOf, APartnerIsFoundWithOrWithoutGzip) {
  TempDir dir;
  write_idx_file(dir / "t10k-images-idx3-ubyte", idx_images(2));
  write_idx_file(dir / "t10k-labels-idx1-ubyte.gz", idx_labels(2));
  EXPECT_EQ(idx_pair_of(dir / "t10k-images-idx3-ubyte").labels, dir / "t10k-labels-idx1-ubyte.gz");
  EXPECT_EQ(idx_pair_of(dir / "t10k-labels-idx1-ubyte.gz").images, dir / "t10k-images-idx3-ubyte");
}

TEST(IdxPairOf, AMissingPartnerIsNamed) {
  TempDir dir;
  write_idx_file(dir / "train-images-idx3-ubyte", idx_images(2));
  EXPECT_THAT([&] { idx_pair_of(dir / "train-images-idx3-ubyte"); },
              ::testing::ThrowsMessage<DataError>(HasSubstr(
                  (dir / "train-labels-idx1-ubyte").string() + ": no such file, the label file")));
  EXPECT_THAT([&] { idx_pair_of(dir / "pixels.idx"); },
              ::testing::ThrowsMessage<UsageError>(HasSubstr("paired by name")));
}

TEST(LoadExamples, FilesAreReadInOrderAndAPairNamedTwiceOnce) {
  TempDir dir;
  write_idx_file(dir / "a-images-idx3-ubyte", idx_images(3, {2, 2}));
  write_idx_file(dir / "a-labels-idx1-ubyte", idx_labels(3));
  IdxArray labels = idx_labels(2);
  labels.data = {41, 7};
  write_idx_file(dir / "b-images-idx3-ubyte.gz", idx_images(2, {4}));
  write_idx_file(dir / "b-labels-idx1-ubyte.gz", labels);

  const Dataset data = load_examples(
      {dir / "a-images-idx3-ubyte", dir / "a-labels-idx1-ubyte", dir / "b-labels-idx1-ubyte.gz"},
      DataOptions{});

  EXPECT_EQ(data.size, 5);
  EXPECT_EQ(data.example_size, 4);
  EXPECT_EQ(data.num_classes, 42);
  EXPECT_THAT(data.labels, ElementsAre(0, 1, 2, 41, 7));
  ASSERT_EQ(data.images.size(), 20u);
  EXPECT_EQ(data.images[2 * 4], 2.0f / 255.0f);
  EXPECT_EQ(data.images[4 * 4 + 3], 1.0f / 255.0f);
}

TEST(LoadExamples, FilesDisagreeingOnFeatureCountAreBothNamed) {
  TempDir dir;
  write_idx_file(dir / "a-images-idx3-ubyte", idx_images(3, {2, 2}));
  write_idx_file(dir / "a-labels-idx1-ubyte", idx_labels(3));
  write_idx_file(dir / "b-images-idx3-ubyte", idx_images(3, {3, 3}));
  write_idx_file(dir / "b-labels-idx1-ubyte", idx_labels(3));
  EXPECT_THAT(
      [&] {
        load_examples({dir / "a-images-idx3-ubyte", dir / "b-images-idx3-ubyte"}, DataOptions{});
      },
      ::testing::ThrowsMessage<DataError>(
          HasSubstr((dir / "a-images-idx3-ubyte").string() + " has 4 features per example but " +
                    (dir / "b-images-idx3-ubyte").string() + " has 9")));
}

TEST(LoadExamples, TfRecordIdxAndCsvOfTheSameImagesLoadTheSameExamples) {
  TempDir dir;
  const IdxArray images = idx_images(4, {3, 2});
  const IdxArray labels = idx_labels(4);
  write_idx_file(dir / "s-images-idx3-ubyte.gz", images);
  write_idx_file(dir / "s-labels-idx1-ubyte.gz", labels);
  TfRecordWriter writer(dir / "s.tfrecord.gz", Compression::kGzip);
  std::string csv = "p0,p1,p2,p3,p4,p5,label\n";
  for (uint32_t i = 0; i < 4; ++i) {
    const std::span<const uint8_t> pixels(images.data.data() + i * 6, 6);
    writer.write(encode_mnist_example(pixels, 3, 2, labels.data[i], MnistLayout::kTf));
    for (uint8_t pixel : pixels) csv += std::to_string(pixel / 255.0f) + ",";
    csv += std::to_string(labels.data[i]) + "\n";
  }
  writer.commit();
  write_bytes(dir / "s.csv", csv);

  const Dataset idx = load_examples({dir / "s-images-idx3-ubyte.gz"}, DataOptions{});
  const Dataset tfrecord = load_examples({dir / "s.tfrecord.gz"}, DataOptions{});
  const Dataset from_csv = load_examples({dir / "s.csv"}, DataOptions{});

  for (const Dataset* other : {&tfrecord, &from_csv}) {
    EXPECT_EQ(other->size, 4);
    EXPECT_EQ(other->example_size, 6);
    EXPECT_EQ(other->labels, idx.labels);
    ASSERT_EQ(other->images.size(), idx.images.size());
    for (size_t k = 0; k < idx.images.size(); ++k) {
      EXPECT_NEAR(other->images[k], idx.images[k], 1e-6) << k;
    }
  }
}

TEST(LoadExamples, UnscaledFeaturesBeyondAThousandWarnOnceNamingTheColumnAndTheRange) {
  TempDir dir;
  write_bytes(dir / "wide.csv", "age,income,label\n30,52000,1\n41,-1200,0\n");
  write_bytes(dir / "also.csv", "age,income,label\n30,99000,1\n");
  const Dataset data = load_examples({dir / "wide.csv", dir / "also.csv"}, DataOptions{});
  ASSERT_EQ(data.notes.warnings.size(), 1u);
  EXPECT_THAT(data.notes.warnings[0],
              AllOf(HasSubstr((dir / "wide.csv").string()), HasSubstr("-1200 to 52000"),
                    HasSubstr("column 1 ('income') holds 52000"), HasSubstr("--feature_scale")));
  EXPECT_FALSE(data.notes.pixels);
  EXPECT_EQ(data.notes.label_source, "column 2 ('label'), by its header name 'label'");

  // With a scale, or within ±1000, nothing is said.
  DataOptions scaled;
  scaled.feature_scale = parse_feature_scale("1/1000");
  EXPECT_TRUE(load_examples({dir / "wide.csv"}, scaled).notes.warnings.empty());
  write_bytes(dir / "narrow.csv", "a,label\n-1000,1\n255,0\n");
  EXPECT_TRUE(load_examples({dir / "narrow.csv"}, DataOptions{}).notes.warnings.empty());
}

TEST(LoadExamples, FilesWithAndWithoutLabelsAreNotMixed) {
  TempDir dir;
  write_bytes(dir / "labelled.csv", "a,b,label\n1,2,0\n");
  write_bytes(dir / "features.csv", "a,b\n1,2\n");
  DataOptions options;
  options.unlabelled_width = 2;
  const Dataset unlabelled = load_examples({dir / "features.csv"}, options);
  EXPECT_FALSE(unlabelled.notes.labelled);
  EXPECT_THAT(unlabelled.labels, ElementsAre(-1));
  EXPECT_EQ(unlabelled.num_classes, 0);
  EXPECT_THAT(
      [&] {
        load_examples({dir / "labelled.csv", dir / "features.csv"}, options);
      },
      ThrowsMessage<DataError>(
          AllOf(HasSubstr("labelled.csv has labels"), HasSubstr("features.csv has none"))));
}

TEST(AbsoluteDataPaths, EachItemIsMadeAbsoluteAndPatternsStayPatterns) {
  const std::filesystem::path here = std::filesystem::current_path();
  EXPECT_EQ(absolute_data_paths("a.csv, data/part-*.csv,/abs/b.csv"),
            (here / "a.csv").string() + "," + (here / "data/part-*.csv").string() + ",/abs/b.csv");
  EXPECT_EQ(absolute_data_paths("./x/../y.tfrecord"), (here / "y.tfrecord").string());
  EXPECT_EQ(absolute_data_paths(""), "");
}

TEST(OpenExampleReader, AMissingFileIsADataErrorNamingIt) {
  TempDir dir;
  EXPECT_THAT([&] { open_example_reader(dir / "gone.csv", DataOptions{}); },
              ::testing::ThrowsMessage<DataError>(
                  HasSubstr((dir / "gone.csv").string() + ": no such file")));
}

TEST(OpenExampleReader, DispatchesOnTheFormat) {
  TempDir dir;
  write_bytes(dir / "t.csv", "a,b,label\n0,255,3\n");
  const std::unique_ptr<ExampleReader> csv = open_example_reader(dir / "t.csv", DataOptions{});
  EXPECT_EQ(csv->feature_count(), 2);
  write_idx_file(dir / "x-images-idx3-ubyte", idx_images(1, {3}));
  write_idx_file(dir / "x-labels-idx1-ubyte", idx_labels(1));
  EXPECT_EQ(open_example_reader(dir / "x-labels-idx1-ubyte", DataOptions{})->feature_count(), 3);
}

}  // namespace
}  // namespace dtrain
