// A user's data files: a comma-separated list of files or glob patterns expanded into paths, each
// opened as an ExampleReader of its format (IDX, TFRecord, CSV), or all of them loaded into memory.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "data/data_options.h"
#include "data/dataset.h"
#include "data/example_reader.h"

namespace dtrain {

// Expands list, items separated by commas ("train.csv", "data/part-*.tfrecord,extra.tfrecord"):
// each item is a glob(3) pattern whose matches are taken in sorted order; the items keep the
// order of the list, and a path that several items name is kept once, where it first appears.
// Throws UsageError naming the item for an empty list or item, or a pattern with wildcards that
// matches nothing; DataError naming the file for a plain path that does not exist.
std::vector<std::filesystem::path> expand_data_paths(const std::string& list);

// An IDX image file and its label file. They are paired by name, as MNIST, Fashion-MNIST and EMNIST
// name theirs: the last "images" in the file name becomes "labels" and the "idxN" after it
// "idx1" ("train-images-idx3-ubyte.gz" <-> "train-labels-idx1-ubyte.gz", "emnist-letters-test-
// images-idx3-ubyte" <-> "emnist-letters-test-labels-idx1-ubyte"); from a label file, "idx1"
// becomes "idx3", else "idx4" or "idx2", whichever exists. A partner that is missing with the
// given file's compression suffix is looked for with ".gz" added or removed.
struct IdxFilePair {
  std::filesystem::path images, labels;
};

// The pair path belongs to, given either of its files. Throws UsageError naming the file when its
// name has neither "images" nor "labels", DataError naming the partner it looked for when that
// does not exist.
IdxFilePair idx_pair_of(const std::filesystem::path& path);

// Opens path as an ExampleReader of format_of(path, options.format); an IDX file brings its
// partner (idx_pair_of). Throws DataError naming the file when it does not exist or its header is
// malformed, UsageError when its format cannot be told.
std::unique_ptr<ExampleReader> open_example_reader(const std::filesystem::path& path,
                                                   const DataOptions& options);

// Reads every example of paths, in order, into memory (IDX pairs named twice, by their image and
// their label file, are read once). num_classes is the largest label + 1 (0 without labels). The
// notes are the first file's, with one warning for the first file whose numeric features reach
// beyond ±kLargeFeature when options has no feature scale. Throws DataError naming both files
// when two files disagree on feature_count or on having labels, naming the place for a negative
// label, and whatever open_example_reader and the readers throw.
Dataset load_examples(const std::vector<std::filesystem::path>& paths, const DataOptions& options);

// list (as expand_data_paths takes it) with each item made absolute against the working
// directory, patterns kept as patterns: what a checkpoint records, so that `dtrain eval` run from
// another folder finds the same files.
std::string absolute_data_paths(const std::string& list);

}  // namespace dtrain
