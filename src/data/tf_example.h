// tf.train.Example records of images and labels, as MNIST is written to TFRecord files: decoding
// one record into (features, label) by the feature names of DataOptions, and encoding MNIST images
// in the two layouts in common use.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "data/data_options.h"

namespace dtrain {

// Decodes the records of one file. The input feature may be
//   - a bytes_list of one value: uint8 pixels, each x scaled to x / 255 (MNIST's image_raw);
//   - a float_list: numeric features, which must be finite (a NaN or an infinity is an error),
//     multiplied by DataOptions::feature_scale when one is given;
//   - an int64_list: pixel values 0..255, each scaled to x / 255 as bytes are (a value outside
//     0..255 is an error, since it cannot be a pixel).
// The label feature must be an int64_list of exactly one value, 0 <= label <= INT32_MAX. Other
// features (height, width, depth, pixels) are ignored. Every record must hold as many features as
// the first one. Not thread-safe.
class TfExampleDecoder {
 public:
  explicit TfExampleDecoder(DataOptions options) : options_(std::move(options)) {}

  // The number of features `record` holds; fixes the count every later record must match.
  // `where` names the record in errors ("train.tfrecords: record 0 (starting at byte 0)").
  // Throws DataError naming where and the feature: not a tf.train.Example, a feature missing, of
  // the wrong kind or of the wrong length, a bad label.
  int64_t feature_count(std::string_view record, const std::string& where);
  // Decodes record into features and label, with the same checks.
  // REQUIRES: feature_count() was called on the first record; features.size() is its result.
  void decode(std::string_view record, std::span<float> features, int32_t& label,
              const std::string& where) const;
  // Whether the first record's input is uint8 pixels (bytes or int64), not a float_list.
  // REQUIRES: feature_count() was called.
  bool pixels() const { return pixels_; }

 private:
  DataOptions options_;
  int64_t feature_count_ = -1;
  bool pixels_ = true;
};

// The two ways MNIST is commonly written as tf.train.Example:
//   kBook: the TensorFlow book's: image_raw (bytes), pixels (int64, rows * cols), label (int64);
//   kTf:   tensorflow's convert_to_records.py: height, width, depth (int64), label (int64),
//          image_raw (bytes).
enum class MnistLayout { kBook, kTf };

// The serialized tf.train.Example of one image of rows x cols uint8 pixels and its label.
// REQUIRES: pixels.size() == rows * cols.
std::string encode_mnist_example(std::span<const uint8_t> pixels, int64_t rows, int64_t cols,
                                 int64_t label, MnistLayout layout);

}  // namespace dtrain
