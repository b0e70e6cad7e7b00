// What a training run reads: MNIST from a folder (the default), or the user's own files for train
// and test, split into train / validation / test Datasets in memory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "data/data_options.h"
#include "data/dataset.h"

namespace dtrain {

struct DataSpec {
  // Comma-separated files or glob patterns (expand_data_paths), both or neither. Neither: MNIST
  // from data_dir (load_mnist); both: the user's files, and data_dir is not read.
  std::string train_paths, test_paths;
  std::filesystem::path data_dir;
  // The first validation_size examples of the training files are held out for validation; 0
  // keeps them all for training.
  int64_t validation_size = 5000;
  DataOptions options;
};

// train and validation come from the training files, test from the test files. All three have
// the same example_size and num_classes (the largest label of any of them + 1, or 10 for MNIST).
struct TrainingData {
  Dataset train, validation, test;
};

// Throws UsageError when only one of train_paths and test_paths is given, validation_size is
// negative or leaves no training examples, or options has a feature scale for uint8 pixels
// (refuse_scale_for_pixels); DataError naming the column and how it was chosen when a CSV's label
// column holds one class only in the training files; DataError naming the files when the training
// and test files differ in feature_count; and whatever load_mnist or load_examples throw.
TrainingData load_training_data(const DataSpec& spec);

}  // namespace dtrain
