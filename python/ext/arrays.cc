// Shapes checked, rows borrowed, labels counted.
#include "ext/arrays.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/error.h"

namespace dtrain::python {

Dataset borrowed_dataset(const Features& x, const Labels& y, const std::string& name, bool pixels) {
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
  Dataset data;
  data.size = n;
  data.example_size = x.shape(1);
  data.borrowed_rows = std::span<const float>(x.data(), static_cast<size_t>(x.size()));
  data.labels.assign(y.data(), y.data() + n);
  data.num_classes = *std::max_element(data.labels.begin(), data.labels.end()) + 1;
  data.notes.pixels = pixels;
  data.notes.label_source = fmt::format("the labels of {}", name);
  return data;
}

}  // namespace dtrain::python
