// Shapes checked, rows borrowed, labels counted.
#include "ext/arrays.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <span>
#include <vector>

#include "base/error.h"

namespace dtrain::python {

void check_finite(const Features& x, const std::string& name) {
  if (x.ndim() != 2 || x.shape(1) == 0) return;
  const std::optional<FeaturePosition> bad = first_nonfinite_feature(
      std::span<const float>(x.data(), static_cast<size_t>(x.size())), x.shape(1));
  if (!bad) return;
  // As the CSV reader words it, with numpy's indices for a file's line and column.
  throw DataError(fmt::format(
      "{}: row {}, column {}: {} is not a finite number; features must be finite, as dtrain "
      "refuses them in a data file (np.isfinite({}).all() finds every one)",
      name, bad->row, bad->column, bad->value, name == "x" ? name : name + "[0]"));
}

namespace {

// Keras multiplies each example's loss by its weight: a negative one would climb the loss, and a
// NaN would reach every parameter.
std::vector<float> checked_weights(const Weights& w, int64_t n) {
  if (w.ndim() != 1 || w.shape(0) != n) {
    throw UsageError(fmt::format("sample_weight: {} weights for {} examples; give one per example",
                                 w.ndim() == 1 ? w.shape(0) : w.size(), n));
  }
  std::vector<float> weights(w.data(), w.data() + n);
  for (int64_t i = 0; i < n; ++i) {
    const float v = weights[static_cast<size_t>(i)];
    if (!std::isfinite(v) || v < 0) {
      throw UsageError(fmt::format(
          "sample_weight: example {} weighs {}; weights must be finite and not negative", i, v));
    }
  }
  return weights;
}

}  // namespace

Dataset borrowed_dataset(const Features& x, const Labels& y, const std::string& name, bool pixels,
                         const std::optional<Weights>& weights) {
  if (x.ndim() != 2) {
    throw UsageError(
        fmt::format("{}: features must be (n, features), got {} dimensions", name, x.ndim()));
  }
  const int64_t n = x.shape(0);
  if (y.ndim() != 1 || y.shape(0) != n) {
    throw UsageError(fmt::format("{}: {} examples but {} labels; y must hold one class per example",
                                 name, n, y.ndim() == 1 ? y.shape(0) : y.size()));
  }
  if (n == 0) throw UsageError(fmt::format("{}: no examples", name));
  check_finite(x, name);
  Dataset data;
  data.size = n;
  data.example_size = x.shape(1);
  data.borrowed_rows = std::span<const float>(x.data(), static_cast<size_t>(x.size()));
  data.labels.assign(y.data(), y.data() + n);
  if (weights) data.weights = checked_weights(*weights, n);
  data.num_classes = *std::max_element(data.labels.begin(), data.labels.end()) + 1;
  data.notes.pixels = pixels;
  data.notes.label_source = fmt::format("the labels of {}", name);
  return data;
}

}  // namespace dtrain::python
