// Checkpoint evaluation.
#include "train/evaluate.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <tuple>

#include "base/error.h"
#include "base/log.h"
#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_manager.h"
#include "ckpt/param_set_checkpoint.h"
#include "data/data_files.h"
#include "data/data_options.h"
#include "data/dataset.h"
#include "nn/keras_json.h"
#include "nn/model_zoo.h"
#include "train/gradient_computer.h"

namespace dtrain {
namespace {

std::pair<Checkpoint, std::filesystem::path> load(const std::filesystem::path& path,
                                                  std::ostream& out) {
  if (!std::filesystem::is_directory(path)) return {read_checkpoint(path), path};
  CheckpointManager::RestoreResult restored = CheckpointManager(path).restore_latest();
  for (const std::string& skipped : restored.skipped)
    fmt::print(out, "skipped checkpoint {}\n", skipped);
  if (!restored.checkpoint) {
    throw CheckpointError(fmt::format("{}: no valid checkpoint in this folder", path.string()));
  }
  return {std::move(*restored.checkpoint), restored.path};
}

ModelConfig model_config(const Checkpoint& ckpt) {
  ModelConfig config;
  config.name = ckpt.model;
  if (ckpt.config.contains("hidden_units"))
    config.hidden_units = ckpt.config["hidden_units"].get<int>();
  return config;
}

// The spec of a checkpoint's model: its own Keras JSON when it has one, else (checkpoints written
// before specs were stored) the built-in model it names. `source` names it in errors.
ModelSpec checkpoint_spec(const Checkpoint& ckpt, const std::string& source) {
  if (ckpt.config.is_object() && ckpt.config.contains("model_spec"))
    return read_keras_json(ckpt.config["model_spec"], source);
  return model_spec(model_config(ckpt));
}

bool use_moving_average(CheckpointWeights weights, const Checkpoint& ckpt) {
  switch (weights) {
    case CheckpointWeights::kRaw:
      return false;
    case CheckpointWeights::kMovingAverage:
      return true;
    case CheckpointWeights::kAsTrained:
      break;
  }
  return ckpt.config.value("eval_moving_average", false);
}

// The files of list, the test data the run recorded in checkpoint: one that has gone is named
// with the flag that points eval elsewhere.
std::vector<std::filesystem::path> recorded_test_files(const std::string& list,
                                                       const std::filesystem::path& checkpoint) {
  try {
    return expand_data_paths(list);
  } catch (const Error& e) {
    throw DataError(fmt::format(
        "{} (the test data recorded in {}): pass --test_data with where the files are now",
        e.what(), checkpoint.string()));
  }
}

// The test set, and where it came from for the closing line.
std::pair<Dataset, std::string> test_set(const EvalConfig& config, const CheckpointModel& loaded,
                                         const DataOptions& options) {
  const Checkpoint& ckpt = loaded.checkpoint;
  const nlohmann::json data = ckpt.config.value("data", nlohmann::json::object());
  if (!config.test_data.empty()) {
    return {load_examples(expand_data_paths(config.test_data), options), config.test_data};
  }
  const std::string recorded = data.value("test_data", std::string());
  if (!recorded.empty()) {
    return {load_examples(recorded_test_files(recorded, loaded.path), options), recorded};
  }
  std::filesystem::path dir = config.data_dir;
  if (dir.empty()) {
    const std::filesystem::path trained_on = data.value("data_dir", std::string());
    dir = !trained_on.empty() && std::filesystem::is_directory(trained_on)
              ? trained_on
              : config.default_data_dir;
  }
  return {std::move(load_mnist(dir, 0).test), dir.string()};
}

}  // namespace

CheckpointModel load_checkpoint_model(const std::filesystem::path& path, CheckpointWeights weights,
                                      std::ostream& log) {
  auto [checkpoint, file] = load(path, log);
  return checkpoint_model(std::move(checkpoint), file, weights);
}

CheckpointModel checkpoint_model(Checkpoint checkpoint, const std::filesystem::path& path,
                                 CheckpointWeights weights) {
  CheckpointModel loaded;
  loaded.checkpoint = std::move(checkpoint);
  loaded.path = path;
  const Checkpoint& ckpt = loaded.checkpoint;
  // The file's name in errors: a refused model (too large, say) is the checkpoint's, not a flag's.
  const std::string source = fmt::format("{}: model spec", loaded.path.string());
  loaded.spec = checkpoint_spec(ckpt, source);
  loaded.model = build_model(loaded.spec, {}, source);
  loaded.params = ParamSet(loaded.model->param_specs());
  loaded.moving_average = use_moving_average(weights, ckpt);
  if (loaded.moving_average &&
      ckpt.find(loaded.params.spec(0).name + "/ExponentialMovingAverage") == nullptr) {
    throw CheckpointError(fmt::format(
        "{}: holds no moving averages of the weights (trained without --moving_average_decay); "
        "drop --moving_average",
        loaded.path.string()));
  }
  load_tensors(ckpt, loaded.params, loaded.moving_average ? "/ExponentialMovingAverage" : "");
  return loaded;
}

DataOptions checkpoint_data_options(const Checkpoint& ckpt) {
  const nlohmann::json data = ckpt.config.value("data", nlohmann::json::object());
  return data_options_from_json(data.value("options", nlohmann::json()));
}

double evaluate_checkpoint(const EvalConfig& config, std::ostream& out) {
  const CheckpointModel loaded = load_checkpoint_model(config.checkpoint, config.weights, out);
  const Checkpoint& ckpt = loaded.checkpoint;
  const Model& model = *loaded.model;
  const DataOptions run_options = checkpoint_data_options(ckpt);
  const DataOptions options = config.data_options ? config.data_options(run_options) : run_options;
  const auto [test, source] = test_set(config, loaded, options);
  if (!test.notes.labelled) {
    throw UsageError(fmt::format("{}: has no labels ({}), so there is no accuracy to measure",
                                 source, test.notes.label_source));
  }
  // A scale the run did not have was given here; the run's own applies to numeric files only.
  if (options.feature_scale && (!run_options.feature_scale ||
                                options.feature_scale->text != run_options.feature_scale->text)) {
    refuse_scale_for_pixels(test.notes, options, source);
  }
  if (test.example_size != model.input_size() || test.num_classes > model.num_classes()) {
    const int64_t row = first_label_outside(test, model.num_classes());
    const std::string labels =
        row >= 0 ? fmt::format("row {} has label {}", row, test.labels[static_cast<size_t>(row)])
                 : fmt::format("labels up to {}", test.num_classes - 1);
    throw DataError(fmt::format(
        "{}: {} examples of {} features and {}, but model {} takes {} features and {}; give "
        "--test_data or --data_dir with the run's kind of data",
        source, test.size, test.example_size, labels, ckpt.model, model.input_size(),
        model.label_rule()));
  }
  GradientComputer computer(model, 1, 1);
  computer.set_precision(Precision::kFp32, config.precision);
  const double accuracy =
      computer.accuracy(loaded.params, test.rows().data(), test.labels.data(), test.size);
  fmt::print(out, "{}: model {} at global step {}{}, on {} ({} test examples)\n",
             loaded.path.string(), ckpt.model, ckpt.global_step,
             loaded.moving_average ? " (moving average)" : "", source, test.size);
  fmt::print(out, "test accuracy = {:.4f}{}\n", accuracy,
             config.precision == Precision::kBf16 ? " (bf16 products, fp32 sums)" : "");
  for (const std::string& warning : model.statistics_warnings(loaded.params, ckpt.global_step))
    spdlog::warn("{}: {}", loaded.path.string(), warning);
  return accuracy;
}

}  // namespace dtrain
