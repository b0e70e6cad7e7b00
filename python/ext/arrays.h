// numpy arrays as the library's Datasets, read in place. The package's Python code has already
// made the features float32, C-contiguous and two-dimensional and the labels int32; these
// functions refuse anything else rather than copy it.
#pragma once

#include <pybind11/numpy.h>

#include <optional>
#include <string>

#include "data/dataset.h"

namespace dtrain::python {

using Features = pybind11::array_t<float, pybind11::array::c_style>;
using Labels = pybind11::array_t<int32_t, pybind11::array::c_style>;
using Weights = pybind11::array_t<float, pybind11::array::c_style>;

// Throws DataError naming x by `name` and the row and column of its first NaN or infinity.
void check_finite(const Features& x, const std::string& name);

// A Dataset whose rows are x's memory (x must outlive it), whose labels are y's, and whose example
// weights are `weights`' (Keras's sample_weight, or its class_weight of each label), where given.
// `name` says which argument it is in errors ("x", "validation_data"); `pixels`: x held uint8
// pixels, scaled. Throws UsageError when x is not (n, features), y not (n,), the weights not (n,)
// finite and not negative, or n is 0; DataError for a feature that is not finite.
Dataset borrowed_dataset(const Features& x, const Labels& y, const std::string& name, bool pixels,
                         const std::optional<Weights>& weights = std::nullopt);

}  // namespace dtrain::python
