// What reading a data set's files found out that a run reports and checks: whether its features
// are uint8 pixels or numeric, where its labels are, and what deserves a warning. The run's data
// line is made from it, and so are the refusals of a scale given for pixels.
#pragma once

#include <string>
#include <vector>

#include "data/data_options.h"

namespace dtrain {

struct DataNotes {
  // uint8 pixels scaled to [0, 1] (IDX, TFRecord bytes or int64), which DataOptions::feature_scale
  // does not apply to; false: numeric features (CSV, TFRecord float_list).
  bool pixels = true;
  // false: input without labels (prediction); the Dataset's labels are then all -1.
  bool labelled = true;
  // Where the labels are, for the data line: "the IDX file train-labels-idx1-ubyte", "feature
  // 'label'", "column 0 ('label'), by its header name 'label'".
  std::string label_source;
  // The labels are a CSV column that was chosen (by name, index or default), so a wrong choice
  // can be named.
  bool label_is_chosen_column = false;
  // One line each: numeric features spanning more than ±kLargeFeature with no feature scale.
  std::vector<std::string> warnings;
};

// Beyond this magnitude unscaled features saturate a softmax (exp overflows float at ~88), and
// the warning says so.
inline constexpr float kLargeFeature = 1000;

// The end of the run's data line: "labels column 0 ('label'), by its header name 'label'; numeric
// features × 1/255", "labels the IDX file ...; uint8 pixels / 255".
std::string describe_features(const DataNotes& notes, const DataOptions& options);

// Throws UsageError naming source (the files) and the scale when options has a feature scale and
// the data are uint8 pixels: they are already scaled to [0, 1], and a scale applied after that
// would train the model on values near 0.
void refuse_scale_for_pixels(const DataNotes& notes, const DataOptions& options,
                             const std::string& source);

}  // namespace dtrain
