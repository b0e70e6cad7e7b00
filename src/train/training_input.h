// What a run trains and evaluates on, from its TrainConfig: MNIST from --data_dir, or the user's
// --train_data / --test_data files, in memory; or, with --shuffle_buffer, the training files
// streamed through a shuffle buffer. The loop asks it for this worker's batches and the test set,
// and never knows which of these it is.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "data/batch_source.h"
#include "data/dataset.h"
#include "nn/model.h"
#include "train/strategy.h"
#include "train/train_config.h"

namespace dtrain {

class TrainingInput {
 public:
  // Loads the test set, and the training set unless it is streamed (then its files are counted
  // and checked). Throws DataError naming the files for a missing, malformed or inconsistent file,
  // UsageError for data flags that do not fit together.
  explicit TrainingInput(const TrainConfig& config);
  // Data already in memory (tests, benchmarks); without a validation set, none.
  TrainingInput(Dataset train, Dataset test);
  TrainingInput(Dataset train, Dataset validation, Dataset test);
  TrainingInput(const TrainingInput&) = delete;
  TrainingInput& operator=(const TrainingInput&) = delete;

  const Dataset& test() const { return test_; }
  // The training examples held out (--validation_size); empty when none are.
  const Dataset& validation() const { return validation_; }
  // Values per example: the training data's where they are in memory, else the test set's.
  int64_t feature_count() const {
    return train_.size > 0 ? train_.example_size : test_.example_size;
  }
  // The largest label of the training and test data, plus one.
  int64_t num_classes() const { return num_classes_; }
  // The training data, for messages: "MNIST in DIR", "2 files (a.csv, ...), streamed".
  // It ends with where the labels are and how the features are scaled (describe_features).
  const std::string& describe() const { return description_; }
  // Lines worth the user's attention found while loading (unscaled large features); at most one.
  const std::vector<std::string>& warnings() const { return warnings_; }

  // This worker's batches: under a distributed strategy, slice `rank` of every global batch of
  // workers × batch_size examples; else the whole data set, shuffled per epoch (in its order
  // without `shuffle`, data in memory only). Streamed data is always cut in slices, which for one
  // worker is the whole data set too.
  std::unique_ptr<BatchSource> batches(const WorkerPlace& place, int batch_size, uint64_t seed,
                                       bool shuffle = true) const;
  // What all-reduce workers must agree on about the training data: a CRC32C of the examples in
  // memory (their weights too), or of the streamed files' names and sizes.
  uint32_t fingerprint() const;
  // Examples in one pass over the training data.
  int64_t train_examples() const;

  // Throws DataError naming the data and the model when the data does not fit it: another number
  // of features, or a label the model does not take, named by its row where the data is in memory.
  void check_fits(const Model& model) const;
  // Throws DataError naming the data and the model for a label of the batch the model does not
  // take: streamed labels are first seen in their batch, and one beyond the model's outputs would
  // index past its logits.
  void check_labels(const Batch& batch, const Model& model) const;

 private:
  std::string in_memory() const;  // "N training, V validation and T test examples ..."

  Dataset train_;                                    // empty when streamed
  std::vector<std::filesystem::path> stream_files_;  // the training files, when streamed
  DataOptions options_;
  int64_t shuffle_buffer_ = 0;
  int64_t stream_examples_ = 0;
  Dataset validation_;
  Dataset test_;
  int64_t num_classes_ = 0;
  std::string description_;
  std::vector<std::string> warnings_;
};

}  // namespace dtrain
