// load_training_data: MNIST through load_mnist, user files through load_examples, then the same
// validation split and one class count for all three sets.
#include "data/training_data.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/error.h"
#include "data/data_files.h"

namespace dtrain {
namespace {

// Moves the first count rows of data into a Dataset of their own; data keeps the rest.
// REQUIRES: 0 <= count <= data.size.
Dataset take_front(Dataset& data, int64_t count) {
  Dataset front;
  front.size = count;
  front.example_size = data.example_size;
  front.num_classes = data.num_classes;
  front.notes = data.notes;
  const auto split = data.images.begin() + count * data.example_size;
  front.images.assign(data.images.begin(), split);
  data.images.erase(data.images.begin(), split);
  front.labels.assign(data.labels.begin(), data.labels.begin() + count);
  data.labels.erase(data.labels.begin(), data.labels.begin() + count);
  data.size -= count;
  return front;
}

// A label column that holds one class is not a label: most often the default (the last column)
// picked up a feature, such as the last pixel of an image that is 0 in every row.
void refuse_one_class(const Dataset& train, const std::string& files) {
  if (!train.notes.label_is_chosen_column || train.size < 2) return;
  const auto [low, high] = std::minmax_element(train.labels.begin(), train.labels.end());
  if (*low != *high) return;
  throw DataError(fmt::format(
      "{}: the label column, {}, holds one class only ({}) in its {} rows: name the label column "
      "with --label_column",
      files, train.notes.label_source, *low, train.size));
}

}  // namespace

TrainingData load_training_data(const DataSpec& spec) {
  if (spec.validation_size < 0) {
    throw UsageError(fmt::format("--validation_size {}: must be at least 0", spec.validation_size));
  }
  if (spec.train_paths.empty() && spec.test_paths.empty()) {
    refuse_scale_for_pixels(DataNotes{}, spec.options,
                            fmt::format("MNIST in {}", spec.data_dir.string()));
    MnistData mnist = load_mnist(spec.data_dir, spec.validation_size);
    return TrainingData{std::move(mnist.train), std::move(mnist.validation), std::move(mnist.test)};
  }
  if (spec.train_paths.empty() || spec.test_paths.empty()) {
    throw UsageError(fmt::format("{} is given without {}: a run on your own files needs both",
                                 spec.train_paths.empty() ? "--test_data" : "--train_data",
                                 spec.train_paths.empty() ? "--train_data" : "--test_data"));
  }
  const std::vector<std::filesystem::path> train_files = expand_data_paths(spec.train_paths);
  const std::vector<std::filesystem::path> test_files = expand_data_paths(spec.test_paths);

  TrainingData data;
  data.train = load_examples(train_files, spec.options);
  refuse_scale_for_pixels(data.train.notes, spec.options, spec.train_paths);
  refuse_one_class(data.train, spec.train_paths);
  data.test = load_examples(test_files, spec.options);
  refuse_scale_for_pixels(data.test.notes, spec.options, spec.test_paths);
  if (data.train.example_size != data.test.example_size) {
    throw DataError(fmt::format("{} has {} features per example but {} has {}",
                                train_files.front().string(), data.train.example_size,
                                test_files.front().string(), data.test.example_size));
  }
  if (spec.validation_size >= data.train.size) {
    throw UsageError(
        fmt::format("--validation_size {}: must be less than the {} training examples in {}",
                    spec.validation_size, data.train.size, spec.train_paths));
  }
  const int64_t num_classes = std::max(data.train.num_classes, data.test.num_classes);
  data.train.num_classes = data.test.num_classes = num_classes;
  data.validation = take_front(data.train, spec.validation_size);
  return data;
}

}  // namespace dtrain
