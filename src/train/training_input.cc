// Loading a run's data, and handing each worker its share of it.
#include "train/training_input.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/crc32c.h"
#include "base/error.h"
#include "data/batcher.h"
#include "data/data_files.h"
#include "data/streaming_source.h"
#include "data/training_data.h"

namespace dtrain {
namespace {

template <typename T>
uint32_t crc_of(std::span<const T> values, uint32_t crc = 0) {
  return crc32c(std::as_bytes(values), crc);
}

std::string file_list(const std::vector<std::filesystem::path>& files) {
  std::string names = files.front().string();
  if (files.size() > 1) names += fmt::format(" and {} more", files.size() - 1);
  return names;
}

}  // namespace

TrainingInput::TrainingInput(const TrainConfig& config)
    : options_(config.data_options), shuffle_buffer_(config.shuffle_buffer) {
  DataSpec spec{.train_paths = config.train_data,
                .test_paths = config.test_data,
                .data_dir = config.data_dir,
                .validation_size = config.validation_size,
                .options = config.data_options};
  if (shuffle_buffer_ == 0) {
    TrainingData data = load_training_data(spec);
    train_ = std::move(data.train);
    validation_ = std::move(data.validation);
    test_ = std::move(data.test);
    num_classes_ = std::max(train_.num_classes, test_.num_classes);
    description_ = config.train_data.empty()
                       ? fmt::format("MNIST in {}", config.data_dir.string())
                       : fmt::format("{} (train), {} (test)", config.train_data, config.test_data);
    description_ += fmt::format(": {}; {}", in_memory(), describe_features(train_.notes, options_));
    warnings_ = train_.notes.warnings.empty() ? test_.notes.warnings : train_.notes.warnings;
    return;
  }
  // Streamed: the training files are read by each worker's reader thread; only the test set is
  // held. validate_train_config has refused streaming without --train_data / --test_data.
  stream_files_ = expand_data_paths(config.train_data);
  test_ = load_examples(expand_data_paths(config.test_data), options_);
  refuse_scale_for_pixels(test_.notes, options_, config.test_data);
  warnings_ = test_.notes.warnings;
  const auto open = [this](const std::filesystem::path& path) {
    return open_example_reader(path, options_);
  };
  // A one-worker source counts the examples and checks the files' shapes; the workers' own
  // sources are made in batches().
  StreamingSource probe(stream_files_, open,
                        StreamingOptions{.batch_size = 1, .seed = 0, .shuffle_buffer = 1});
  stream_examples_ = probe.example_count();
  if (probe.feature_count() != test_.example_size) {
    throw DataError(fmt::format("{} has {} features per example but {} has {}",
                                stream_files_.front().string(), probe.feature_count(),
                                config.test_data, test_.example_size));
  }
  // The labels of a stream are seen only as it goes: the test set's bound them here, and the loop
  // checks each batch's labels against the model's classes.
  num_classes_ = test_.num_classes;
  // The streamed files' own notes, from a reader that reads no further than their first row.
  DataNotes notes;
  const std::unique_ptr<ExampleReader> first = open(stream_files_.front());
  notes.pixels = first->pixels();
  notes.label_source = first->label_source();
  refuse_scale_for_pixels(notes, options_, config.train_data);
  description_ = fmt::format(
      "{} (train, streamed through a shuffle buffer of {} examples), {} (test): {} training and "
      "{} test examples of {} features; {}",
      file_list(stream_files_), shuffle_buffer_, config.test_data, stream_examples_, test_.size,
      test_.example_size, describe_features(notes, options_));
}

TrainingInput::TrainingInput(Dataset train, Dataset test)
    : TrainingInput(std::move(train), Dataset{}, std::move(test)) {}

TrainingInput::TrainingInput(Dataset train, Dataset validation, Dataset test)
    : train_(std::move(train)),
      validation_(std::move(validation)),
      test_(std::move(test)),
      // An empty validation set says nothing about the classes (its default is MNIST's ten).
      num_classes_(std::max({train_.num_classes, validation_.size > 0 ? validation_.num_classes : 0,
                             test_.num_classes})),
      description_(in_memory()) {}

std::string TrainingInput::in_memory() const {
  return fmt::format("{} training{} and {} test examples of {} features, in memory", train_.size,
                     validation_.size > 0 ? fmt::format(", {} validation", validation_.size) : "",
                     test_.size, test_.example_size);
}

std::unique_ptr<BatchSource> TrainingInput::batches(const WorkerPlace& place, int batch_size,
                                                    uint64_t seed, bool shuffle) const {
  if (stream_files_.empty()) {
    return std::make_unique<Batcher>(
        train_, batch_size, seed, place.rank, place.workers,
        place.distributed ? Sharding::kBatchSlices : Sharding::kStrided, shuffle);
  }
  return std::make_unique<StreamingSource>(
      stream_files_,
      [this](const std::filesystem::path& path) { return open_example_reader(path, options_); },
      StreamingOptions{.batch_size = batch_size,
                       .seed = seed,
                       .shuffle_buffer = shuffle_buffer_,
                       .worker_index = place.rank,
                       .worker_count = place.workers});
}

uint32_t TrainingInput::fingerprint() const {
  if (stream_files_.empty()) {
    const uint32_t examples =
        crc_of(std::span<const int32_t>(train_.labels),
               crc_of(std::span<const float>(train_.rows().data(), train_.rows().size())));
    return train_.weights.empty() ? examples
                                  : crc_of(std::span<const float>(train_.weights), examples);
  }
  uint32_t crc = 0;
  for (const auto& file : stream_files_) {
    const std::string entry =
        fmt::format("{}:{};", file.filename().string(), std::filesystem::file_size(file));
    crc = crc32c(std::as_bytes(std::span(entry.data(), entry.size())), crc);
  }
  return crc;
}

int64_t TrainingInput::train_examples() const {
  return stream_files_.empty() ? train_.size : stream_examples_;
}

void TrainingInput::check_labels(const Batch& batch, const Model& model) const {
  const int32_t classes = model.num_classes();
  for (int i = 0; i < batch.size; ++i) {
    if (batch.labels[i] < 0 || batch.labels[i] >= classes) {
      throw DataError(fmt::format("a training example has label {} ({}), but model {} takes {}",
                                  batch.labels[i], describe(), model.name(), model.label_rule()));
    }
  }
}

void TrainingInput::check_fits(const Model& model) const {
  // Training and test data in memory may differ from each other (data handed over as arrays).
  const int64_t width = feature_count() != model.input_size() || test_.size == 0
                            ? feature_count()
                            : test_.example_size;
  if (width != model.input_size()) {
    throw DataError(fmt::format(
        "the data has {} features per example ({}), but model {} takes {}: give a model whose "
        "input has {} values, or other data",
        width, description_, model.name(), model.input_size(), width));
  }
  if (num_classes_ <= model.num_classes()) return;
  for (const auto& [data, which] : {std::pair{&train_, "training"}, std::pair{&test_, "test"}}) {
    const int64_t row = first_label_outside(*data, model.num_classes());
    if (row < 0) continue;
    throw DataError(fmt::format("row {} of the {} data ({}) has label {}, but model {} takes {}",
                                row, which, description_, data->labels[static_cast<size_t>(row)],
                                model.name(), model.label_rule()));
  }
  throw DataError(fmt::format("the data has labels up to {} ({}), but model {} takes {}",
                              num_classes_ - 1, description_, model.name(), model.label_rule()));
}

}  // namespace dtrain
