// The engine's calls, each checking what Python gave before it releases the GIL.
#include "ext/engine.h"

#include <fmt/format.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "base/error.h"
#include "ckpt/checkpoint_manager.h"
#include "export/checkpoint_export.h"
#include "ext/fit_run.h"
#include "ext/keras_weights.h"
#include "nn/binary_cross_entropy.h"
#include "nn/keras_json_writer.h"
#include "nn/model_plan.h"
#include "plan/flag_checks.h"
#include "plan/flag_parser.h"
#include "train/gradient_computer.h"
#include "train/local_strategy.h"
#include "train/loop_step.h"
#include "train/training_state.h"

namespace py = pybind11;

namespace dtrain::python {
namespace {

// The largest batch of an evaluation or prediction pass: activations of a few MB for the models
// of the zoo.
constexpr int kInferenceBatch = 1000;

// The settings a model's weights belong with, without what points into a run that has ended.
TrainConfig kept_settings(TrainConfig config) {
  config.stop = nullptr;
  config.observer = nullptr;
  config.owner = nullptr;
  config.control = nullptr;
  config.initial_state = nullptr;
  return config;
}

// The activation the model's last layer declares and the engine leaves to its loss: what turns
// the logits it computes into what Keras's predict returns.
enum class HeadActivation { kNone, kSoftmax, kSigmoid };

HeadActivation head_activation(const CheckpointModel& m) {
  if (m.model->loss() == Loss::kBinaryCrossEntropy) return HeadActivation::kSigmoid;
  // A softmax ends the spec only as its last activation (nn/model_spec.h).
  if (!m.spec.layers.empty() && m.spec.layers.back().activation == ActivationKind::kSoftmax)
    return HeadActivation::kSoftmax;
  return HeadActivation::kNone;
}

// rows: (n, width) logits, replaced by the head's activation of them, computed in double as
// `dtrain predict` computes its probabilities.
void apply_head(HeadActivation head, float* rows, int n, int width) {
  if (head == HeadActivation::kSigmoid) {
    for (int i = 0; i < n * width; ++i) rows[i] = static_cast<float>(sigmoid_probability(rows[i]));
    return;
  }
  if (head != HeadActivation::kSoftmax) return;
  for (int i = 0; i < n; ++i) {
    float* row = rows + static_cast<int64_t>(i) * width;
    const double max = *std::max_element(row, row + width);
    double sum = 0;
    for (int k = 0; k < width; ++k) sum += std::exp(double{row[k]} - max);
    for (int k = 0; k < width; ++k)
      row[k] = static_cast<float>(std::exp(double{row[k]} - max) / sum);
  }
}

void check_fits(const Model& model, int64_t features) {
  if (features == model.input_size()) return;
  throw DataError(fmt::format("x has {} features per example, but model {} takes {}", features,
                              model.name(), model.input_size()));
}

void check_labels(const Dataset& data, const Model& model, const char* name) {
  const int64_t outside = first_label_outside(data, model.num_classes());
  if (outside < 0) return;
  throw DataError(fmt::format("{}: example {} has label {}, but model {} takes {}", name, outside,
                              data.labels[static_cast<size_t>(outside)], model.name(),
                              model.label_rule()));
}

std::string shape_text(const Shape& shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) text += fmt::format("{}{}", i ? ", " : "", shape[i]);
  return text + (shape.size() == 1 ? ",)" : ")");
}

int64_t values_of(const Shape& shape) {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  return n;
}

}  // namespace

// train_on_batch's run: a local run's state and step, kept between calls.
struct BatchSession {
  explicit BatchSession(const TrainConfig& c) : config(c), state(config), strategy(config) {}
  const TrainConfig config;
  TrainingState state;
  LocalStrategy strategy;
  std::unique_ptr<GradientComputer> computer;
  std::unique_ptr<LoopStep> step;  // runs computer
  int largest_batch = 0;
  int64_t steps = 0;
};

Engine::Engine(const std::string& model)
    : config_(kept_settings(plan_from_arguments(Command::kTrain, {"--model", model}).config)) {}

Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;
Engine::~Engine() = default;

Engine Engine::load(const std::string& path) {
  std::ostringstream skipped;
  CheckpointModel loaded = load_checkpoint_model(path, CheckpointWeights::kAsTrained, skipped);
  Engine engine;
  engine.config_.model.name = loaded.checkpoint.model;
  engine.path_ = loaded.path;
  engine.state_ = loaded.checkpoint;
  engine.built_ = std::make_shared<const CheckpointModel>(std::move(loaded));
  return engine;
}

std::string Engine::model_json() const { return to_keras_json(built()->spec).dump(); }

py::dict Engine::fit(const std::vector<std::string>& arguments, const Features& x, const Labels& y,
                     std::optional<Weights> weights, std::optional<Features> val_x,
                     std::optional<Labels> val_y, bool pixels, bool shuffle, py::object on_event,
                     py::object on_text, bool wants_batches) {
  refuse_while_fitting("fit");
  settle_session();
  std::vector<std::string> flags = arguments;
  // Validation data are evaluated at each epoch's end, as Keras's fit evaluates them; early
  // stopping then counts epochs.
  if (val_x) flags.emplace_back("--eval_each_epoch");
  RunPlan plan = plan_from_arguments(Command::kTrain, flags);
  InMemoryData data;
  data.train = borrowed_dataset(x, y, "x", pixels, weights);
  if (val_x) {
    data.validation = borrowed_dataset(*val_x, *val_y, "validation_data", pixels);
    if (data.validation.example_size != data.train.example_size) {
      throw UsageError(fmt::format("validation_data: {} features per example, but x has {}",
                                   data.validation.example_size, data.train.example_size));
    }
    data.test = data.validation;
  } else {
    // No test set: the run's closing evaluation has nothing to do.
    data.test.example_size = data.train.example_size;
    data.test.num_classes = 0;
  }
  plan.config.shuffle = shuffle;
  // A model trained or loaded before goes on from its weights; a new one starts from the seed.
  if (state_) plan.config.initial_state = &*state_;
  FitRun run(plan, data, {std::move(on_event), std::move(on_text), wants_batches});
  // Set under the GIL, as every other call reads it: the run below releases it.
  running_ = &run;
  struct Done {
    FitRun*& running;
    ~Done() { running = nullptr; }
  } done{running_};
  InProcessResult result = run.run();
  running_ = nullptr;
  config_ = kept_settings(plan.config);
  state_ = std::move(result.state);
  built_.reset();
  path_ = "(a model in memory)";
  if (run.interrupted() || run.callback_failed()) run.raise_pending();
  py::dict summary;
  summary["global_step"] = result.result.global_step;
  summary["steps"] = result.result.steps_run;
  summary["train_seconds"] = result.result.train_seconds;
  summary["examples_per_sec"] = result.result.examples_per_second;
  summary["loss"] = result.result.final_loss;
  return summary;
}

std::pair<double, double> Engine::evaluate(const Features& x, const Labels& y,
                                           const std::string& precision) {
  refuse_unless_readable("evaluate");
  const Precision products = usable_precision(precision);
  // Held for the pass: a fit that ends in another thread meanwhile replaces the engine's model,
  // never this one.
  const std::shared_ptr<const CheckpointModel> held = built();
  const CheckpointModel& m = *held;
  const Dataset data = borrowed_dataset(x, y, "x", false);
  check_fits(*m.model, data.example_size);
  check_labels(data, *m.model, "y");
  py::gil_scoped_release release;
  GradientComputer computer(*m.model, 1, kInferenceBatch, config_.threads);
  computer.set_precision(Precision::kFp32, products);
  const GradientComputer::Evaluation e =
      computer.evaluate(m.params, data.rows().data(), data.labels.data(), data.size);
  return {e.accuracy, e.loss};
}

py::array_t<float> Engine::predict(const Features& x, bool logits) {
  refuse_unless_readable("predict");
  const std::shared_ptr<const CheckpointModel> held = built();
  const CheckpointModel& m = *held;
  if (x.ndim() != 2) throw UsageError("x: features must be (n, features)");
  check_fits(*m.model, x.shape(1));
  check_finite(x, "x");
  const int64_t n = x.shape(0);
  const int64_t width = m.model->output_width();
  py::array_t<float> outputs({n, width});
  float* to = outputs.mutable_data();
  const float* from = x.data();
  const HeadActivation head = logits ? HeadActivation::kNone : head_activation(m);
  py::gil_scoped_release release;
  const int batch = static_cast<int>(std::min<int64_t>(kInferenceBatch, std::max<int64_t>(n, 1)));
  Workspace workspace(*m.model, batch, WorkspaceUse::kInference);
  ModelRunner runner(*m.model, workspace);
  for (int64_t begin = 0; begin < n; begin += batch) {
    const int count = static_cast<int>(std::min<int64_t>(batch, n - begin));
    const float* out = runner.logits(m.params, from + begin * x.shape(1), count);
    std::copy(out, out + count * width, to + begin * width);
    apply_head(head, to + begin * width, count, static_cast<int>(width));
  }
  return outputs;
}

double Engine::train_on_batch(const std::vector<std::string>& arguments, const Features& x,
                              const Labels& y, std::optional<Weights> weights) {
  refuse_while_fitting("train_on_batch");
  const Dataset data = borrowed_dataset(x, y, "x", false, weights);
  if (!session_) {
    // The settings of the model's last fit, else of its recipe, as a fit would take them.
    const TrainConfig settings =
        config_.model.source != nullptr
            ? config_
            : kept_settings(plan_from_arguments(Command::kTrain, arguments).config);
    auto session = std::make_unique<BatchSession>(settings);
    const Checkpoint start = current();
    if (start.optimizer == session->state.optimizer().name()) {
      session->state.restore(start);
    } else {
      session->state.restore_parameters(start);
    }
    session->state.step = start.global_step;
    session_ = std::move(session);
  }
  BatchSession& s = *session_;
  check_fits(s.state.model(), data.example_size);
  check_labels(data, s.state.model(), "y");
  if (data.size > std::numeric_limits<int>::max()) throw UsageError("x: too many rows for a batch");
  const int n = static_cast<int>(data.size);
  built_.reset();
  py::gil_scoped_release release;
  if (n > s.largest_batch) {
    s.step.reset();
    s.computer = std::make_unique<GradientComputer>(s.state.model(), 1, n, s.config.threads);
    s.step =
        std::make_unique<LoopStep>(s.config, s.strategy.traits(n), s.strategy, *s.computer, "");
    s.largest_batch = n;
  }
  const Batch batch{data.rows().data(), data.labels.data(), n,
                    data.weights.empty() ? nullptr : data.weights.data()};
  s.computer->set_step_seed(step_seed(s.config.seed, s.state.step, 0));
  // No epochs to count: the schedule's rate is its base, the learning rate.
  return s.step->run(s.state, batch, s.config.learning_rate, ++s.steps, /*keep_gradient=*/false)
      .loss;
}

std::vector<std::string> Engine::weight_names() {
  refuse_unless_readable("get_weights");
  const std::shared_ptr<const CheckpointModel> m = built();
  std::vector<std::string> names;
  for (const KerasWeight& w : keras_weights(m->spec, m->model->param_specs()))
    names.push_back(w.name);
  return names;
}

py::list Engine::get_weights() {
  refuse_unless_readable("get_weights");
  const Checkpoint state = current();
  const std::shared_ptr<const CheckpointModel> m = built();
  py::list arrays;
  for (const KerasWeight& w : keras_weights(m->spec, m->model->param_specs())) {
    const CheckpointTensor* t = state.find(w.name);
    if (t == nullptr) throw CheckpointError(fmt::format("the weights hold no '{}'", w.name));
    const std::vector<float> values =
        w.transposed ? transposed(t->values, t->shape[0], t->shape[1]) : t->values;
    py::array_t<float> array(std::vector<py::ssize_t>(w.shape.begin(), w.shape.end()));
    std::copy(values.begin(), values.end(), array.mutable_data());
    arrays.append(array);
  }
  return arrays;
}

void Engine::set_weights(const py::list& arrays) {
  refuse_while_fitting("set_weights");
  settle_session();
  Checkpoint state = current();
  const std::shared_ptr<const CheckpointModel> m = built();
  const std::vector<KerasWeight> weights = keras_weights(m->spec, m->model->param_specs());
  if (arrays.size() != weights.size()) {
    std::string expected;
    for (const KerasWeight& w : weights)
      expected += fmt::format("{}{} {}", expected.empty() ? "" : ", ", w.name, shape_text(w.shape));
    throw UsageError(fmt::format(
        "set_weights(): model {} has {} weights ({}), in the order get_weights() gives them; got "
        "{} arrays",
        m->model->name(), weights.size(), expected, arrays.size()));
  }
  for (size_t i = 0; i < weights.size(); ++i) {
    const KerasWeight& w = weights[i];
    const auto given =
        py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(arrays[i]);
    if (!given) {
      throw UsageError(
          fmt::format("set_weights(): array {} ({}) is not an array of numbers", i, w.name));
    }
    const Shape shape(given.shape(), given.shape() + given.ndim());
    if (shape != w.shape) {
      throw UsageError(
          fmt::format("set_weights(): array {} ({}) has shape {}, but Keras's layout of it is {}{}",
                      i, w.name, shape_text(shape), shape_text(w.shape),
                      w.transposed && shape == Shape{w.shape[1], w.shape[0]}
                          ? " (a Dense kernel is (inputs, units); this one is transposed)"
                          : ""));
    }
    std::vector<float> values(given.data(), given.data() + given.size());
    if (!std::all_of(values.begin(), values.end(), [](float v) { return std::isfinite(v); })) {
      throw UsageError(
          fmt::format("set_weights(): array {} ({}) holds a NaN or an infinity", i, w.name));
    }
    if (w.transposed) values = transposed(values, w.shape[0], w.shape[1]);
    // The moving average, where the model keeps one, restarts from the values set, as the
    // model's weights are then these.
    for (const std::string& name : {w.name, w.name + "/ExponentialMovingAverage"}) {
      for (CheckpointTensor& t : state.tensors) {
        if (t.name == name) t.values = values;
      }
    }
  }
  state_ = std::move(state);
  built_.reset();
}

py::tuple Engine::summary_rows() {
  refuse_unless_readable("summary");
  const std::shared_ptr<const CheckpointModel> m = built();
  const ModelPlan plan =
      plan_model(m->spec, std::numeric_limits<uint64_t>::max(), m->model->name());
  const std::vector<KerasWeight> weights = keras_weights(m->spec, m->model->param_specs());
  py::list rows;
  for (size_t i = 0; i < m->spec.layers.size(); ++i) {
    const LayerSpec& layer = m->spec.layers[i];
    int64_t params = 0, frozen = 0;
    for (const KerasWeight& w : weights) {
      if (w.layer != i) continue;
      params += values_of(w.shape);
      if (!w.trainable) frozen += values_of(w.shape);
    }
    std::vector<py::object> shape{py::none()};
    for (const int64_t d : plan.layers[i].output_shape) shape.push_back(py::int_(d));
    rows.append(py::make_tuple(layer.name, keras_class_name(layer.kind), py::tuple(py::cast(shape)),
                               params, frozen));
  }
  // What the optimizer keeps beside the weights (Adam's moments), once it has trained them.
  int64_t slots = 0;
  const Checkpoint state = current();
  for (const CheckpointTensor& t : state.tensors) {
    const bool weight = std::any_of(weights.begin(), weights.end(),
                                    [&](const KerasWeight& w) { return w.name == t.name; });
    const bool average = t.name.ends_with("/ExponentialMovingAverage");
    if (!weight && !average) slots += static_cast<int64_t>(t.values.size());
  }
  return py::make_tuple(m->spec.name, rows, trained() ? slots : 0);
}

std::string Engine::save(const std::string& dir) {
  refuse_unless_readable("save");
  const Checkpoint state = current();
  std::vector<TensorRef> tensors;
  for (const CheckpointTensor& t : state.tensors) tensors.push_back({t.name, t.shape, t.values});
  CheckpointManager manager(dir, config_.keep_checkpoints);
  return manager.save({state.global_step, state.model, state.optimizer, state.config}, tensors)
      .string();
}

std::string Engine::export_onnx(const std::string& path) {
  refuse_unless_readable("export_onnx");
  return dtrain::export_onnx(*built(), path);
}

Checkpoint Engine::current() const {
  if (running_ != nullptr) return running_->weights();
  if (session_) return session_->state.snapshot(session_->config);
  if (state_) return *state_;
  TrainingState fresh(config_);
  fresh.initialize(config_.seed);
  return fresh.snapshot(config_);
}

std::shared_ptr<const CheckpointModel> Engine::built() {
  // A fit's weights change from one boundary to the next: made afresh, and not kept.
  if (fitting()) {
    return std::make_shared<const CheckpointModel>(
        checkpoint_model(current(), path_, CheckpointWeights::kAsTrained));
  }
  if (!built_) {
    built_ = std::make_shared<const CheckpointModel>(
        checkpoint_model(current(), path_, CheckpointWeights::kAsTrained));
  }
  return built_;
}

std::shared_ptr<const CheckpointModel> Engine::built() const {
  return const_cast<Engine*>(this)->built();
}

bool Engine::readable_while_fitting() const { return running_ != nullptr && running_->paused(); }

// A fit of this model runs with the GIL released: its weights are the run's until it returns.
// Read from another thread they would be the ones it started from, or race the run's end.
void Engine::refuse_while_fitting(const char* call) const {
  if (!fitting()) return;
  throw UsageError(fmt::format(
      "{}(): this model's fit() is running{}, and its weights change until it returns; call {}() "
      "once fit() has returned",
      call, readable_while_fitting() ? " (this is one of its callbacks)" : " in another thread",
      call));
}

void Engine::refuse_unless_readable(const char* call) const {
  if (!fitting() || readable_while_fitting()) return;
  throw UsageError(fmt::format(
      "{}(): this model's fit() is running in another thread, and its weights change until it "
      "returns; call {}() once fit() has returned, or from one of its callbacks",
      call, call));
}

void Engine::settle_session() {
  if (!session_) return;
  state_ = session_->state.snapshot(session_->config);
  session_.reset();
  built_.reset();
}

}  // namespace dtrain::python
