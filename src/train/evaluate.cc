// Checkpoint evaluation.
#include "train/evaluate.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <tuple>

#include "base/error.h"
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

// The test set, and where it came from for the closing line.
std::pair<Dataset, std::string> test_set(const EvalConfig& config, const Checkpoint& ckpt) {
  const nlohmann::json data = ckpt.config.value("data", nlohmann::json::object());
  const std::string test_data =
      config.test_data.empty() ? data.value("test_data", std::string()) : config.test_data;
  if (!test_data.empty()) {
    return {load_examples(expand_data_paths(test_data), checkpoint_data_options(ckpt)), test_data};
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
  CheckpointModel loaded;
  std::tie(loaded.checkpoint, loaded.path) = load(path, log);
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
  const auto [test, source] = test_set(config, ckpt);
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
  const double accuracy =
      computer.accuracy(loaded.params, test.images.data(), test.labels.data(), test.size);
  fmt::print(out, "{}: model {} at global step {}{}, on {} ({} test examples)\n",
             loaded.path.string(), ckpt.model, ckpt.global_step,
             loaded.moving_average ? " (moving average)" : "", source, test.size);
  fmt::print(out, "test accuracy = {:.4f}\n", accuracy);
  return accuracy;
}

}  // namespace dtrain
