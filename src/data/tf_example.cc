// tf.train.Example through the protobuf classes generated from data/proto: one parse per record,
// then checks that name the feature and say what was found instead of what was expected.
#include "data/tf_example.h"

#include <fmt/format.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "base/error.h"
#include "data/proto/example.pb.h"

namespace dtrain {
namespace {

// Division, not multiplication by 1/255, as data/dataset.cc scales IDX pixels: the same bits.
constexpr float kPixelMax = 255.0f;

const char* kind_name(const tensorflow::Feature& feature) {
  switch (feature.kind_case()) {
    case tensorflow::Feature::kBytesList:
      return "bytes_list";
    case tensorflow::Feature::kFloatList:
      return "float_list";
    case tensorflow::Feature::kInt64List:
      return "int64_list";
    default:
      return "no list";
  }
}

tensorflow::Example parse(std::string_view record, const std::string& where) {
  tensorflow::Example example;
  if (!example.ParseFromArray(record.data(), static_cast<int>(record.size()))) {
    throw DataError(
        fmt::format("{}: its {} bytes are not a tf.train.Example", where, record.size()));
  }
  return example;
}

// The feature called name; `flag` is the option that names it, for the hint.
const tensorflow::Feature& find_feature(const tensorflow::Example& example, const std::string& name,
                                        const std::string& where, const char* flag) {
  const auto& features = example.features().feature();
  const auto found = features.find(name);
  if (found != features.end()) return found->second;
  std::vector<std::string> present;
  for (const auto& [key, value] : features) present.push_back(key);
  std::sort(present.begin(), present.end());
  throw DataError(fmt::format(
      "{}: feature '{}' is missing (the record has: {}); choose another "
      "with {}",
      where, name, present.empty() ? "no features" : fmt::to_string(fmt::join(present, ", ")),
      flag));
}

// How many floats the input feature decodes to.
int64_t input_length(const tensorflow::Feature& feature, const std::string& name,
                     const std::string& where) {
  switch (feature.kind_case()) {
    case tensorflow::Feature::kBytesList:
      if (feature.bytes_list().value_size() != 1) {
        throw DataError(fmt::format(
            "{}: feature '{}' is a bytes_list of {} values; expected one value of uint8 pixels",
            where, name, feature.bytes_list().value_size()));
      }
      return static_cast<int64_t>(feature.bytes_list().value(0).size());
    case tensorflow::Feature::kFloatList:
      return feature.float_list().value_size();
    case tensorflow::Feature::kInt64List:
      return feature.int64_list().value_size();
    default:
      throw DataError(
          fmt::format("{}: feature '{}' holds no list; expected a bytes_list, "
                      "float_list or int64_list",
                      where, name));
  }
}

int32_t decode_label(const tensorflow::Example& example, const std::string& name,
                     const std::string& where) {
  const tensorflow::Feature& feature = find_feature(example, name, where, "--label_feature");
  if (feature.kind_case() != tensorflow::Feature::kInt64List) {
    throw DataError(fmt::format("{}: label feature '{}' is a {}; expected an int64_list", where,
                                name, kind_name(feature)));
  }
  if (feature.int64_list().value_size() != 1) {
    throw DataError(fmt::format("{}: label feature '{}' holds {} values; expected exactly one",
                                where, name, feature.int64_list().value_size()));
  }
  const int64_t label = feature.int64_list().value(0);
  if (label < 0 || label > std::numeric_limits<int32_t>::max()) {
    throw DataError(fmt::format("{}: label feature '{}' is {}; expected a class 0 to {}", where,
                                name, label, std::numeric_limits<int32_t>::max()));
  }
  return static_cast<int32_t>(label);
}

void decode_input(const tensorflow::Feature& feature, const std::string& name, std::span<float> out,
                  const std::optional<FeatureScale>& scale, const std::string& where) {
  switch (feature.kind_case()) {
    case tensorflow::Feature::kBytesList: {
      const std::string& bytes = feature.bytes_list().value(0);
      for (size_t i = 0; i < out.size(); ++i) {
        out[i] = static_cast<float>(static_cast<uint8_t>(bytes[i])) / kPixelMax;
      }
      return;
    }
    case tensorflow::Feature::kFloatList:
      for (size_t i = 0; i < out.size(); ++i) {
        const float value = feature.float_list().value(static_cast<int>(i));
        // As the CSV reader refuses them: a NaN or an infinity would reach the loss and be
        // reported as a divergence, blaming the learning rate.
        if (!std::isfinite(value)) {
          throw DataError(fmt::format("{}: feature '{}' value {} is {}; features must be finite",
                                      where, name, i, value));
        }
        out[i] = scale ? scale->apply(value) : value;
        if (!std::isfinite(out[i])) {
          throw DataError(
              fmt::format("{}: feature '{}' value {} is {}, which times --feature_scale {} is not "
                          "a finite float",
                          where, name, i, value, scale->text));
        }
      }
      return;
    case tensorflow::Feature::kInt64List:
      for (size_t i = 0; i < out.size(); ++i) {
        const int64_t value = feature.int64_list().value(static_cast<int>(i));
        if (value < 0 || value > 255) {
          throw DataError(
              fmt::format("{}: feature '{}' value {} is {}; an int64_list input holds "
                          "pixels 0 to 255",
                          where, name, i, value));
        }
        out[i] = static_cast<float>(value) / kPixelMax;
      }
      return;
    default:
      break;
  }
}

void add_int64(tensorflow::Features& features, const char* name, int64_t value) {
  (*features.mutable_feature())[name].mutable_int64_list()->add_value(value);
}

}  // namespace

int64_t TfExampleDecoder::feature_count(std::string_view record, const std::string& where) {
  const tensorflow::Example example = parse(record, where);
  const std::string& name = options_.image_feature;
  const tensorflow::Feature& input = find_feature(example, name, where, "--image_feature");
  const int64_t count = input_length(input, name, where);
  if (count == 0) throw DataError(fmt::format("{}: feature '{}' is empty", where, name));
  feature_count_ = count;
  pixels_ = input.kind_case() != tensorflow::Feature::kFloatList;
  return count;
}

void TfExampleDecoder::decode(std::string_view record, std::span<float> features, int32_t& label,
                              const std::string& where) const {
  const tensorflow::Example example = parse(record, where);
  const std::string& name = options_.image_feature;
  const tensorflow::Feature& input = find_feature(example, name, where, "--image_feature");
  const int64_t count = input_length(input, name, where);
  if (count != feature_count_) {
    throw DataError(fmt::format("{}: feature '{}' holds {} values; the first record's holds {}",
                                where, name, count, feature_count_));
  }
  label = decode_label(example, options_.label_feature, where);
  decode_input(input, name, features, options_.feature_scale, where);
}

std::string encode_mnist_example(std::span<const uint8_t> pixels, int64_t rows, int64_t cols,
                                 int64_t label, MnistLayout layout) {
  tensorflow::Example example;
  tensorflow::Features& features = *example.mutable_features();
  (*features.mutable_feature())["image_raw"].mutable_bytes_list()->add_value(
      reinterpret_cast<const char*>(pixels.data()), pixels.size());
  add_int64(features, "label", label);
  if (layout == MnistLayout::kBook) {
    add_int64(features, "pixels", rows * cols);
  } else {
    add_int64(features, "height", rows);
    add_int64(features, "width", cols);
    add_int64(features, "depth", 1);
  }
  // Deterministic: map entries in key order, so the same images always make the same file.
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    example.SerializeToCodedStream(&coded);
  }
  return bytes;
}

}  // namespace dtrain
