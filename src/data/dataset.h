// Examples in memory (Dataset): features as float32 rows, labels as int32. Built from an IDX pair
// of any image size, or as MNIST split into train / validation / test the way TensorFlow's
// read_data_sets splits it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "data/data_notes.h"
#include "data/idx.h"
#include "tensor/aligned.h"

namespace dtrain {

constexpr int64_t kMnistImageSide = 28;
constexpr int64_t kMnistExampleSize = kMnistImageSide * kMnistImageSide;  // 784
constexpr int64_t kMnistClasses = 10;

// The rows are (size, example_size) row-major; labels[i] in 0..num_classes-1 is the class of row i.
// num_classes is what the files say (the largest label + 1, or 10 for MNIST); whether it fits the
// model is the model's business.
struct Dataset {
  FloatBuffer images;  // the rows, when the Dataset owns them
  // Rows that live elsewhere (a caller's numpy array), read in place instead of `images`.
  // REQUIRES: they outlive the Dataset and every copy of it.
  std::span<const float> borrowed_rows;
  std::vector<int32_t> labels;
  // How much each example's loss counts (Keras's sample_weight, or its class_weight of the
  // label): size entries, or empty when every example counts once.
  std::vector<float> weights;
  int64_t size = 0;
  int64_t example_size = kMnistExampleSize;
  int64_t num_classes = kMnistClasses;
  DataNotes notes;  // how the files' values became these: pixels or numeric, the labels' source

  // The (size, example_size) rows, wherever they are.
  std::span<const float> rows() const {
    return borrowed_rows.data() != nullptr ? borrowed_rows : std::span<const float>(images);
  }
};

// The first row of data whose label is outside 0..classes-1, or -1 when there is none.
int64_t first_label_outside(const Dataset& data, int64_t classes);

// Where a feature is a NaN or an infinity: its example and its place in the example, both from 0.
struct FeaturePosition {
  int64_t row = 0;
  int64_t column = 0;
  float value = 0;
};

// The first value of rows ((n, width) row-major) that is not a finite number, or nullopt. The
// readers of files refuse such a value as they read it (a NaN reaches the loss, which then blames
// the learning rate); rows that arrive in memory are checked with this. REQUIRES: width > 0.
std::optional<FeaturePosition> first_nonfinite_feature(std::span<const float> rows, int64_t width);

struct MnistData {
  Dataset train, validation, test;
};

// Converts an IDX image array of dims (count, d1, d2, ...) and a label array (count) into a Dataset
// with example_size d1 * d2 * ..., scaling each pixel x to x / 255; any label 0..255 is kept, and
// num_classes is the largest label + 1 (0 when count is 0). images_name and labels_name (usually
// the file paths) name the culprit in errors. Throws DataError for an image array of fewer than 2
// dimensions or with an empty example, a label array of other than 1 dimension, data that does not
// match the dims, or differing counts.
Dataset make_dataset(const IdxArray& images, const IdxArray& labels, const std::string& images_name,
                     const std::string& labels_name);

// dir/name if present, else dir/name.gz if present, as load_mnist finds its files. Throws DataError
// naming both when neither is there.
std::filesystem::path find_mnist_file(const std::filesystem::path& dir, const std::string& name);

// Loads the four MNIST files (or Fashion-MNIST's, which share names and layout) from dir, each
// either raw (train-images-idx3-ubyte, ...) or gzipped (the same name + ".gz"). validation is the
// first validation_size of the 60000 training examples and train the rest, as TensorFlow's
// read_data_sets does; test is the 10000 t10k examples. Throws DataError for a missing or malformed
// file, UsageError if validation_size is negative or leaves no training examples. Unlike
// make_dataset it insists on MNIST's shape: 28x28 images, labels 0..9, and num_classes 10 in all
// three sets.
MnistData load_mnist(const std::filesystem::path& dir, int64_t validation_size = 5000);

}  // namespace dtrain
