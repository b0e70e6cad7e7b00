// One example at a time from one data file, whatever its format (IDX, TFRecord, CSV): the seam
// between the file formats and everything that batches, shuffles or streams examples.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

namespace dtrain {

class ExampleReader {
 public:
  virtual ~ExampleReader() = default;

  // Floats per example. Known once the reader is open (a TFRecord reader peeks at its first
  // record), so a mismatch with the model is found before training starts.
  virtual int64_t feature_count() const = 0;
  // Reads the next example: its features into `features` and its class into `label` (-1 when the
  // reader is not labelled()). Returns false at the end of the file. Throws DataError naming the
  // file and the place (line, byte offset, record) for anything malformed. REQUIRES:
  // features.size() == feature_count().
  virtual bool next(std::span<float> features, int32_t& label) = 0;
  // How many examples the file holds, when that is known without reading them (IDX: from its
  // header); nullopt otherwise. Lets a loader size its buffers once and a streaming source count
  // its steps without a pass over the data.
  virtual std::optional<int64_t> example_count() const { return std::nullopt; }
  // Where the reader stands, for messages: "train.csv:17", "a.tfrecord at byte 4096".
  virtual std::string position() const = 0;

  // Whether the features are uint8 pixels scaled to [0, 1] (IDX, TFRecord bytes or int64), which
  // DataOptions::feature_scale does not apply to; false: numeric features, scaled by it.
  virtual bool pixels() const { return true; }
  // false: the file holds features only (prediction input), and every label is -1.
  virtual bool labelled() const { return true; }
  // Where the labels are, for the run's data line (data/data_notes.h); "" when it has no words.
  virtual std::string label_source() const { return ""; }
  // The labels are a CSV column chosen by name, index or default.
  virtual bool label_is_chosen_column() const { return false; }
  // Feature i of an example as the file places it, for messages: "column 4 ('pixel3')".
  virtual std::string feature_name(int64_t i) const { return "feature " + std::to_string(i); }
};

}  // namespace dtrain
