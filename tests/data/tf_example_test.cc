// TfExampleDecoder and the TFRecord ExampleReader: both common MNIST layouts read with no
// options; bytes, float and int64 inputs; every malformed record named by file, record, offset
// and feature.
#include "data/tf_example.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "base/error.h"
#include "data/example_files.h"
#include "data/proto/example.pb.h"
#include "data/tfrecord.h"
#include "support/temp_dir.h"

namespace dtrain {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using testing::TempDir;
using ::testing::ThrowsMessage;

std::vector<uint8_t> pixels_of(int image, size_t count = 784) {
  std::vector<uint8_t> pixels(count);
  for (size_t i = 0; i < count; ++i) pixels[i] = static_cast<uint8_t>(i * 3 + image * 11);
  return pixels;
}

std::vector<float> scaled(const std::vector<uint8_t>& pixels) {
  std::vector<float> out;
  for (uint8_t p : pixels) out.push_back(static_cast<float>(p) / 255.0f);
  return out;
}

void write_tfrecord(const std::filesystem::path& path, const std::vector<std::string>& records,
                    Compression compression = Compression::kNone) {
  TfRecordWriter writer(path, compression);
  for (const std::string& record : records) writer.write(record);
  writer.commit();
}

std::string serialized(const tensorflow::Example& example) { return example.SerializeAsString(); }

tensorflow::Example example_with(const std::vector<float>& floats, int64_t label) {
  tensorflow::Example example;
  auto& features = *example.mutable_features()->mutable_feature();
  for (float f : floats) features["image_raw"].mutable_float_list()->add_value(f);
  features["label"].mutable_int64_list()->add_value(label);
  return example;
}

// Reads every example of path with default options; checks each is image i, label i % 10.
void expect_mnist_like(const std::filesystem::path& path, int images) {
  auto reader = make_tfrecord_example_reader(path, DataOptions{});
  ASSERT_EQ(reader->feature_count(), 784);
  std::vector<float> features(784);
  int32_t label = -1;
  for (int i = 0; i < images; ++i) {
    ASSERT_TRUE(reader->next(features, label)) << i;
    EXPECT_EQ(label, i % 10);
    EXPECT_THAT(features, ElementsAreArray(scaled(pixels_of(i)))) << i;
  }
  EXPECT_FALSE(reader->next(features, label));
}

TEST(TfrecordExampleReader, ReadsTheBookLayoutAndTheTfLayoutWithNoOptions) {
  TempDir dir;
  for (MnistLayout layout : {MnistLayout::kBook, MnistLayout::kTf}) {
    std::vector<std::string> records;
    for (int i = 0; i < 12; ++i) {
      records.push_back(encode_mnist_example(pixels_of(i), 28, 28, i % 10, layout));
    }
    write_tfrecord(dir / "mnist.tfrecords.gz", records, Compression::kGzip);
    expect_mnist_like(dir / "mnist.tfrecords.gz", 12);
  }
}

TEST(TfExampleEncoding, TheLayoutsHoldTheFeaturesTheirWritersWrite) {
  tensorflow::Example book, tf;
  ASSERT_TRUE(
      book.ParseFromString(encode_mnist_example(pixels_of(0), 28, 28, 7, MnistLayout::kBook)));
  ASSERT_TRUE(tf.ParseFromString(encode_mnist_example(pixels_of(0), 28, 28, 7, MnistLayout::kTf)));
  const auto& b = book.features().feature();
  EXPECT_EQ(b.size(), 3u);
  EXPECT_EQ(b.at("pixels").int64_list().value(0), 784);
  EXPECT_EQ(b.at("label").int64_list().value(0), 7);
  EXPECT_EQ(b.at("image_raw").bytes_list().value(0).size(), 784u);
  const auto& t = tf.features().feature();
  EXPECT_EQ(t.size(), 5u);
  EXPECT_EQ(t.at("height").int64_list().value(0), 28);
  EXPECT_EQ(t.at("width").int64_list().value(0), 28);
  EXPECT_EQ(t.at("depth").int64_list().value(0), 1);
  EXPECT_EQ(t.at("image_raw").bytes_list().value(0),
            std::string(reinterpret_cast<const char*>(pixels_of(0).data()), 784));
}

TEST(TfExampleDecoder, AFloatListIsTakenAsItIs) {
  TfExampleDecoder decoder{DataOptions{}};
  const std::string record = serialized(example_with({0.5f, -2.0f, 300.0f}, 4));
  ASSERT_EQ(decoder.feature_count(record, "r"), 3);
  std::vector<float> features(3);
  int32_t label = -1;
  decoder.decode(record, features, label, "r");
  EXPECT_THAT(features, ElementsAreArray({0.5f, -2.0f, 300.0f}));
  EXPECT_EQ(label, 4);
}

TEST(TfExampleDecoder, AFloatListIsMultipliedByTheFeatureScaleAndPixelsAreNot) {
  DataOptions options;
  options.feature_scale = parse_feature_scale("1/2");
  TfExampleDecoder decoder{options};
  const std::string floats = serialized(example_with({0.5f, -2.0f, 300.0f}, 4));
  ASSERT_EQ(decoder.feature_count(floats, "r"), 3);
  EXPECT_FALSE(decoder.pixels());
  std::vector<float> features(3);
  int32_t label = -1;
  decoder.decode(floats, features, label, "r");
  EXPECT_THAT(features, ElementsAreArray({0.25f, -1.0f, 150.0f}));

  TfExampleDecoder bytes_decoder{options};
  const std::string image = encode_mnist_example(pixels_of(0), 28, 28, 3, MnistLayout::kTf);
  ASSERT_EQ(bytes_decoder.feature_count(image, "r"), 784);
  EXPECT_TRUE(bytes_decoder.pixels());
  std::vector<float> pixels(784);
  bytes_decoder.decode(image, pixels, label, "r");
  EXPECT_THAT(pixels, ElementsAreArray(scaled(pixels_of(0))));
}

TEST(TfExampleDecoder, AnInt64ListIsPixelsScaledLikeBytesAndOutOfRangeValuesAreRefused) {
  DataOptions options;
  options.image_feature = "pixels_list";
  options.label_feature = "class";
  TfExampleDecoder decoder{options};
  tensorflow::Example example;
  auto& features = *example.mutable_features()->mutable_feature();
  for (int64_t v : {0, 51, 255}) features["pixels_list"].mutable_int64_list()->add_value(v);
  features["class"].mutable_int64_list()->add_value(9);
  ASSERT_EQ(decoder.feature_count(serialized(example), "r"), 3);
  std::vector<float> out(3);
  int32_t label = -1;
  decoder.decode(serialized(example), out, label, "r");
  EXPECT_THAT(out, ElementsAreArray({0.0f, 0.2f, 1.0f}));
  EXPECT_EQ(label, 9);
  features["pixels_list"].mutable_int64_list()->set_value(1, 256);
  EXPECT_THAT([&] { decoder.decode(serialized(example), out, label, "f: record 2"); },
              ThrowsMessage<DataError>(AllOf(HasSubstr("f: record 2"), HasSubstr("'pixels_list'"),
                                             HasSubstr("value 1 is 256"))));
}

// Decoding `bad` as the second record of a file whose first record is fine must fail naming
// the file, record 1, its offset, and `expected`.
void expect_second_record_fails(const tensorflow::Example& bad, const std::string& expected) {
  TempDir dir;
  const std::string first = encode_mnist_example(pixels_of(0), 28, 28, 3, MnistLayout::kBook);
  write_tfrecord(dir / "bad.tfrecord", {first, serialized(bad)});
  auto reader = make_tfrecord_example_reader(dir / "bad.tfrecord", DataOptions{});
  std::vector<float> features(784);
  int32_t label = -1;
  ASSERT_TRUE(reader->next(features, label));
  const std::string offset = std::to_string(12 + first.size() + 4);
  EXPECT_THAT([&] { reader->next(features, label); },
              ThrowsMessage<DataError>(AllOf(HasSubstr("bad.tfrecord"),
                                             HasSubstr("record 1 (starting at byte " + offset),
                                             HasSubstr(expected))));
}

// As the CSV reader refuses them: a NaN or an infinity would reach the loss, which then diverges
// and the run blames the learning rate.
TEST(TfrecordExampleReader, ANonFiniteFloatFeatureIsRefusedNamingTheRecordAndTheValue) {
  for (const float bad_value :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
        -std::numeric_limits<float>::infinity()}) {
    std::vector<float> floats = scaled(pixels_of(1));
    floats[17] = bad_value;
    expect_second_record_fails(example_with(floats, 1),
                               fmt::format("feature 'image_raw' value 17 is {}; features must be "
                                           "finite",
                                           bad_value));
  }
}

TEST(TfrecordExampleReader, AMissingImageFeatureIsNamedWithTheFeaturesPresent) {
  tensorflow::Example bad = example_with({}, 1);
  bad.mutable_features()->mutable_feature()->erase("image_raw");
  (*bad.mutable_features()->mutable_feature())["img"].mutable_float_list()->add_value(1);
  expect_second_record_fails(bad, "feature 'image_raw' is missing (the record has: img, label)");
}

TEST(TfrecordExampleReader, AnImageOfAnotherLengthThanTheFirstIsRefused) {
  tensorflow::Example bad;
  auto& f = *bad.mutable_features()->mutable_feature();
  f["image_raw"].mutable_bytes_list()->add_value(std::string(783, '\1'));
  f["label"].mutable_int64_list()->add_value(1);
  expect_second_record_fails(bad, "'image_raw' holds 783 values; the first record's holds 784");
}

TEST(TfrecordExampleReader, ABytesImageOfTwoValuesIsRefused) {
  tensorflow::Example bad;
  auto& f = *bad.mutable_features()->mutable_feature();
  f["image_raw"].mutable_bytes_list()->add_value(std::string(392, '\1'));
  f["image_raw"].mutable_bytes_list()->add_value(std::string(392, '\1'));
  f["label"].mutable_int64_list()->add_value(1);
  expect_second_record_fails(bad, "'image_raw' is a bytes_list of 2 values");
}

TEST(TfrecordExampleReader, ALabelOfTheWrongKindOrCountOrRangeIsRefused) {
  tensorflow::Example bad;
  auto& f = *bad.mutable_features()->mutable_feature();
  f["image_raw"].mutable_bytes_list()->add_value(std::string(784, '\1'));
  f["label"].mutable_float_list()->add_value(1);
  expect_second_record_fails(bad, "label feature 'label' is a float_list; expected an int64_list");
  f["label"].mutable_int64_list()->add_value(1);
  f["label"].mutable_int64_list()->add_value(2);
  expect_second_record_fails(bad, "label feature 'label' holds 2 values; expected exactly one");
  f["label"].mutable_int64_list()->clear_value();
  f["label"].mutable_int64_list()->add_value(-1);
  expect_second_record_fails(bad, "label feature 'label' is -1");
  f["label"].mutable_int64_list()->set_value(0, int64_t{1} << 31);
  expect_second_record_fails(bad, "label feature 'label' is 2147483648");
}

TEST(TfrecordExampleReader, ARecordThatIsNotAnExampleIsRefused) {
  TempDir dir;
  write_tfrecord(dir / "junk.tfrecord", {std::string("\xff\xff\xff", 3)});
  EXPECT_THAT([&] { make_tfrecord_example_reader(dir / "junk.tfrecord", DataOptions{}); },
              ThrowsMessage<DataError>(AllOf(HasSubstr("junk.tfrecord: record 0 (starting at "
                                                       "byte 0)"),
                                             HasSubstr("not a tf.train.Example"))));
}

TEST(TfrecordExampleReader, AFileWithNoRecordsIsRefusedAtOpen) {
  TempDir dir;
  write_tfrecord(dir / "empty.tfrecord", {});
  EXPECT_THAT([&] { make_tfrecord_example_reader(dir / "empty.tfrecord", DataOptions{}); },
              ThrowsMessage<DataError>(HasSubstr("empty.tfrecord: holds no records")));
}

TEST(TfrecordExampleReader, PositionNamesTheFileAndTheRecordsOffset) {
  TempDir dir;
  const std::string record = encode_mnist_example(pixels_of(0), 28, 28, 3, MnistLayout::kTf);
  write_tfrecord(dir / "p.tfrecord", {record, record});
  auto reader = make_tfrecord_example_reader(dir / "p.tfrecord", DataOptions{});
  std::vector<float> features(784);
  int32_t label = -1;
  ASSERT_TRUE(reader->next(features, label));
  ASSERT_TRUE(reader->next(features, label));
  EXPECT_EQ(reader->position(),
            (dir / "p.tfrecord").string() + " at byte " + std::to_string(record.size() + 16));
}

TEST(DataFormatOf, TheNameTellsTheFormatThroughACompressionSuffix) {
  EXPECT_EQ(format_of("a/train.tfrecords", DataFormat::kAuto), DataFormat::kTfRecord);
  EXPECT_EQ(format_of("train.tfrecord.gz", DataFormat::kAuto), DataFormat::kTfRecord);
  EXPECT_EQ(format_of("x.tfr.zlib", DataFormat::kAuto), DataFormat::kTfRecord);
  EXPECT_EQ(format_of("train.csv.gz", DataFormat::kAuto), DataFormat::kCsv);
  EXPECT_EQ(format_of("train-images-idx3-ubyte.gz", DataFormat::kAuto), DataFormat::kIdx);
  EXPECT_EQ(format_of("anything", DataFormat::kCsv), DataFormat::kCsv);
  EXPECT_THAT([] { format_of("data.bin", DataFormat::kAuto); },
              ThrowsMessage<UsageError>(AllOf(HasSubstr("data.bin"), HasSubstr("--data_format"))));
}

}  // namespace
}  // namespace dtrain
