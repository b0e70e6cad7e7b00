// The data line's words for a data set's labels and scale, and the refusal of a pointless scale.
#include "data/data_notes.h"

#include <fmt/format.h>

#include "base/error.h"

namespace dtrain {

std::string describe_features(const DataNotes& notes, const DataOptions& options) {
  const std::string labels =
      notes.labelled ? fmt::format("labels {}", notes.label_source.empty() ? std::string("given")
                                                                           : notes.label_source)
                     : fmt::format("no labels ({})", notes.label_source);
  if (notes.pixels) return labels + "; uint8 pixels / 255";
  if (!options.feature_scale) return labels + "; numeric features as given (no --feature_scale)";
  return fmt::format("{}; numeric features × {}", labels, options.feature_scale->text);
}

void refuse_scale_for_pixels(const DataNotes& notes, const DataOptions& options,
                             const std::string& source) {
  if (!notes.pixels || !options.feature_scale) return;
  throw UsageError(fmt::format(
      "--feature_scale {}: {} holds uint8 pixels, which dtrain already scales to [0, 1] (x / 255); "
      "the scale is for numeric features (CSV, TFRecord float_list): leave it out",
      options.feature_scale->text, source));
}

}  // namespace dtrain
