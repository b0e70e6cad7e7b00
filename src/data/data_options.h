// How to read a user's data files: format, compression, and which features or columns hold the
// input and the label, and the scale of numeric features. The CLI fills it from --data_format,
// --compression, --image_feature, --label_feature, --label_column and --feature_scale; nothing
// below cli/ reads flags. A checkpoint records it (data_options_json), so eval, predict, export and
// the Python API read data as the run did.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "data/feature_scale.h"

namespace dtrain {

enum class DataFormat { kAuto, kIdx, kTfRecord, kCsv };
enum class Compression { kAuto, kNone, kGzip, kZlib };

struct DataOptions {
  DataFormat format = DataFormat::kAuto;         // kAuto: from each file's extension
  Compression compression = Compression::kAuto;  // kAuto: from ".gz" / ".zlib", else none
  // TFRecord of tf.train.Example: the input feature (bytes of uint8 pixels, scaled to [0, 1], or a
  // float_list taken as is) and the label feature (int64_list of one value).
  std::string image_feature = "image_raw";
  std::string label_feature = "label";
  // CSV: the label's column, by header name or 0-based index, or "none" (prediction input without
  // labels); empty: the column whose header is label, class, target or y (any case), else the
  // last column.
  std::string label_column;
  // Numeric features (CSV, TFRecord float_list) are multiplied by it; nullopt: taken as they are.
  // uint8 pixels are always x / 255 and never scaled (data/data_notes.h refuses a scale for them).
  std::optional<FeatureScale> feature_scale;
  // Not recorded: what prediction knows of the model. A CSV without a label column named by
  // label_column or its header, whose rows have at most this many fields, holds features only;
  // 0: a CSV row always holds a label.
  int64_t unlabelled_width = 0;
};

// label_column's value for data without labels.
inline constexpr const char* kNoLabelColumn = "none";

// "auto", "idx", "tfrecord", "csv"; "auto", "none", "gzip", "zlib".
const char* format_name(DataFormat format);
const char* compression_name(Compression compression);

// The options as a checkpoint records them, and back: `dtrain eval` reads the test data as the
// run did. Names it does not know throw DataError naming them.
nlohmann::json data_options_json(const DataOptions& options);
DataOptions data_options_from_json(const nlohmann::json& json);

}  // namespace dtrain
