// dtrain.Model's engine (_dtrain.Engine): one model's weights and the settings they were trained
// with, and what Python does with them — fit through the run plan, evaluate, predict, save as a
// checkpoint that `dtrain eval/export/predict` read, load, export as ONNX.
#include <fmt/format.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "ckpt/checkpoint_manager.h"
#include "export/checkpoint_export.h"
#include "ext/arrays.h"
#include "ext/bindings.h"
#include "ext/fit_run.h"
#include "nn/keras_json_writer.h"
#include "nn/model_zoo.h"
#include "plan/flag_parser.h"
#include "plan/flags.h"
#include "train/evaluate.h"
#include "train/gradient_computer.h"
#include "train/training_state.h"

namespace py = pybind11;

namespace dtrain::python {
namespace {

// The largest batch of an evaluation or prediction pass: activations of a few MB for the models
// of the zoo.
constexpr int kInferenceBatch = 1000;

// A flag's value as the command line would spell it: numbers as Python prints them (the shortest
// text that reads back as the same float), lists joined by the flag's delimiter.
std::string flag_text(const FlagSpec& flag, const py::handle& value) {
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    if (flag.delimiter == 0) {
      throw py::type_error(fmt::format("{}: takes one value, not a list", flag.name.substr(2)));
    }
    std::string text;
    for (const py::handle item : value) {
      if (!text.empty()) text += flag.delimiter;
      text += py::str(item).cast<std::string>();
    }
    return text;
  }
  return py::str(value).cast<std::string>();
}

// fit's keywords as `dtrain train` arguments: each a flag of the run plan under its own name;
// None leaves the flag to its default (the model's recipe, then the table's).
std::vector<std::string> flag_arguments(const py::dict& keywords) {
  std::vector<std::string> arguments;
  for (const auto& [key, value] : keywords) {
    const std::string name = "--" + key.cast<std::string>();
    const FlagSpec* flag = find_flag(name);
    if (flag == nullptr || flag->hidden || std::holds_alternative<std::monostate>(flag->field)) {
      throw py::type_error(
          fmt::format("fit() got an unexpected keyword argument '{}': not a flag of dtrain train "
                      "(`dtrain train --help` lists them)",
                      key.cast<std::string>()));
    }
    if (value.is_none()) continue;
    if (flag->is_switch) {
      if (!py::isinstance<py::bool_>(value)) {
        throw py::type_error(
            fmt::format("{}: is a switch; give True or False", key.cast<std::string>()));
      }
      if (value.cast<bool>()) arguments.push_back(name);
      continue;
    }
    if (py::isinstance<py::bool_>(value)) {
      throw py::type_error(fmt::format("{}: takes a value, not {}", key.cast<std::string>(),
                                       value.cast<bool>() ? "True" : "False"));
    }
    arguments.push_back(name);
    arguments.push_back(flag_text(*flag, value));
  }
  return arguments;
}

// The settings a model's weights belong with, without what points into a run that has ended.
TrainConfig kept_settings(TrainConfig config) {
  config.stop = nullptr;
  config.observer = nullptr;
  config.initial_state = nullptr;
  return config;
}

class Engine {
 public:
  explicit Engine(const std::string& model)
      : config_(kept_settings(plan_from_arguments(Command::kTrain, {"--model", model}).config)) {}

  static Engine load(const std::string& path) {
    std::ostringstream skipped;
    CheckpointModel loaded = load_checkpoint_model(path, CheckpointWeights::kAsTrained, skipped);
    Engine engine;
    engine.config_.model.name = loaded.checkpoint.model;
    engine.path_ = loaded.path;
    engine.state_ = loaded.checkpoint;
    engine.built_.emplace(std::move(loaded));
    return engine;
  }

  std::string model_name() const { return config_.model.name; }
  std::string model_json() const { return to_keras_json(built().spec).dump(); }
  bool trained() const { return state_.has_value(); }

  py::dict fit(const std::vector<std::string>& arguments, const Features& x, const Labels& y,
               std::optional<Features> val_x, std::optional<Labels> val_y, bool pixels,
               py::object on_record, py::object on_text) {
    RunPlan plan = plan_from_arguments(Command::kTrain, arguments);
    InMemoryData data;
    data.train = borrowed_dataset(x, y, "x", pixels);
    if (val_x) {
      data.validation = borrowed_dataset(*val_x, *val_y, "validation_data", pixels);
      if (data.validation.example_size != data.train.example_size) {
        throw UsageError(fmt::format("validation_data: {} features per example, but x has {}",
                                     data.validation.example_size, data.train.example_size));
      }
      data.test = data.validation;
      plan.config.eval_each_epoch = true;
    } else {
      // No test set: the run's closing evaluation has nothing to do.
      data.test.example_size = data.train.example_size;
      data.test.num_classes = 0;
    }
    // A model trained or loaded before goes on from its weights; a new one starts from the seed.
    if (state_) plan.config.initial_state = &*state_;
    FitRun run(plan, data, {std::move(on_record), std::move(on_text)});
    InProcessResult result = run.run();
    config_ = kept_settings(plan.config);
    state_ = std::move(result.state);
    built_.reset();
    path_ = "(a model in memory)";
    if (run.interrupted()) run.raise_interrupt();
    py::dict summary;
    summary["global_step"] = result.result.global_step;
    summary["steps"] = result.result.steps_run;
    summary["train_seconds"] = result.result.train_seconds;
    summary["examples_per_sec"] = result.result.examples_per_second;
    summary["loss"] = result.result.final_loss;
    return summary;
  }

  // {accuracy, loss} of the weights the model evaluates with (its moving average, where it was
  // trained to evaluate on one).
  std::pair<double, double> evaluate(const Features& x, const Labels& y) {
    const CheckpointModel& m = built();
    const Dataset data = borrowed_dataset(x, y, "x", false);
    check_fits(*m.model, data.example_size);
    const int64_t outside = first_label_outside(data, m.model->num_classes());
    if (outside >= 0) {
      throw UsageError(fmt::format("y: example {} has label {}, but model {} takes {}", outside,
                                   data.labels[static_cast<size_t>(outside)], m.model->name(),
                                   m.model->label_rule()));
    }
    py::gil_scoped_release release;
    GradientComputer computer(*m.model, 1, kInferenceBatch, config_.threads);
    const GradientComputer::Evaluation e =
        computer.evaluate(m.params, data.rows().data(), data.labels.data(), data.size);
    return {e.accuracy, e.loss};
  }

  // The logits, (n, outputs).
  py::array_t<float> predict(const Features& x) {
    const CheckpointModel& m = built();
    if (x.ndim() != 2) throw UsageError("x: features must be (n, features)");
    check_fits(*m.model, x.shape(1));
    const int64_t n = x.shape(0);
    const int64_t width = m.model->output_width();
    py::array_t<float> logits({n, width});
    float* to = logits.mutable_data();
    const float* from = x.data();
    {
      py::gil_scoped_release release;
      const int batch =
          static_cast<int>(std::min<int64_t>(kInferenceBatch, std::max<int64_t>(n, 1)));
      Workspace workspace(*m.model, batch, WorkspaceUse::kInference);
      ModelRunner runner(*m.model, workspace);
      for (int64_t begin = 0; begin < n; begin += batch) {
        const int count = static_cast<int>(std::min<int64_t>(batch, n - begin));
        const float* out = runner.logits(m.params, from + begin * x.shape(1), count);
        std::copy(out, out + count * width, to + begin * width);
      }
    }
    return logits;
  }

  // A checkpoint in `dir` (created if need be) as a training run's --train_dir holds it.
  std::string save(const std::string& dir) {
    const Checkpoint state = current();
    std::vector<TensorRef> tensors;
    for (const CheckpointTensor& t : state.tensors) tensors.push_back({t.name, t.shape, t.values});
    CheckpointManager manager(dir, config_.keep_checkpoints);
    return manager.save({state.global_step, state.model, state.optimizer, state.config}, tensors)
        .string();
  }

  std::string export_onnx(const std::string& path) { return dtrain::export_onnx(built(), path); }

 private:
  Engine() = default;

  static void check_fits(const Model& model, int64_t features) {
    if (features == model.input_size()) return;
    throw DataError(fmt::format("x has {} features per example, but model {} takes {}", features,
                                model.name(), model.input_size()));
  }

  // The weights: trained or loaded, else drawn from the seed as a run's first step would.
  Checkpoint current() const {
    if (state_) return *state_;
    TrainingState fresh(config_);
    fresh.initialize(config_.seed);
    return fresh.snapshot(config_);
  }

  const CheckpointModel& built() {
    if (!built_) built_.emplace(checkpoint_model(current(), path_, CheckpointWeights::kAsTrained));
    return *built_;
  }
  const CheckpointModel& built() const { return const_cast<Engine*>(this)->built(); }

  TrainConfig config_;
  std::optional<Checkpoint> state_;
  std::filesystem::path path_ = "(a model in memory)";
  std::optional<CheckpointModel> built_;  // current() ready to run; reset when it changes
};

}  // namespace

void bind_model(py::module_& m) {
  m.def("models", &model_names, "The names of the built-in models");
  m.def("flag_arguments", &flag_arguments, py::arg("keywords"),
        "fit's keywords as `dtrain train` arguments");
  py::class_<Engine>(m, "Engine")
      .def(py::init<const std::string&>(), py::arg("model"))
      .def_static("load", &Engine::load, py::arg("path"))
      .def_property_readonly("model_name", &Engine::model_name)
      .def_property_readonly("model_json", &Engine::model_json)
      .def_property_readonly("trained", &Engine::trained)
      .def("fit", &Engine::fit, py::arg("arguments"), py::arg("x").noconvert(),
           py::arg("y").noconvert(), py::arg("val_x").noconvert(), py::arg("val_y").noconvert(),
           py::arg("pixels"), py::arg("on_record"), py::arg("on_text"))
      .def("evaluate", &Engine::evaluate, py::arg("x").noconvert(), py::arg("y").noconvert())
      .def("predict", &Engine::predict, py::arg("x").noconvert())
      .def("save", &Engine::save, py::arg("dir"))
      .def("export_onnx", &Engine::export_onnx, py::arg("path"));
}

}  // namespace dtrain::python
