// dtrain.Model's engine (_dtrain.Engine): one model's weights and the settings they were trained
// with, and what Python does with them — fit through the run plan (with Keras's callbacks at the
// chief's boundaries), evaluate, predict, one step at a time (train_on_batch), the weights in
// Keras's order and layouts, save as a checkpoint that `dtrain eval/export/predict` read, load,
// export as ONNX.
//
// Thread-safety: every call holds the GIL, which orders them; fit and the passes of evaluate and
// predict release it while they compute. While a fit runs, its weights are the run's: the calls
// that read them are answered from the chief's state where the chief waits at a boundary for the
// fit's callbacks, and refused elsewhere (another thread); those that change them are refused.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ext/arrays.h"
#include "train/evaluate.h"
#include "train/train_config.h"

namespace dtrain::python {

class FitRun;
struct BatchSession;

class Engine {
 public:
  // model: what `dtrain train --model` takes (a built-in model's name, a Keras JSON file).
  explicit Engine(const std::string& model);
  static Engine load(const std::string& path);
  Engine(Engine&&) noexcept;
  Engine& operator=(Engine&&) noexcept;
  ~Engine();

  std::string model_name() const { return config_.model.name; }
  std::string model_json() const;
  bool trained() const { return state_.has_value() || session_ != nullptr; }

  // One fit: `arguments` are `dtrain train` arguments; val_x/val_y the data evaluated at each
  // epoch's end; weights each example's weight (Keras's sample_weight) or None; shuffle false
  // keeps x's order. on_event, on_text and wants_batches: ext/fit_run.h.
  pybind11::dict fit(const std::vector<std::string>& arguments, const Features& x, const Labels& y,
                     std::optional<Weights> weights, std::optional<Features> val_x,
                     std::optional<Labels> val_y, bool pixels, bool shuffle,
                     pybind11::object on_event, pybind11::object on_text, bool wants_batches);
  // {accuracy, loss} of the weights the model evaluates with (its moving average, where it was
  // trained to evaluate on one); `precision` "bf16" runs the products on bf16 inputs, as
  // `dtrain eval --precision bf16` does (refused as that flag is).
  std::pair<double, double> evaluate(const Features& x, const Labels& y,
                                     const std::string& precision);
  // What the model outputs, (n, outputs): its last activation applied to the logits, as Keras's
  // predict returns them (probabilities for a softmax or sigmoid head); with `logits`, before it.
  pybind11::array_t<float> predict(const Features& x, bool logits);
  // One step of the model's optimizer on this batch at its learning rate, from the weights and
  // slots the model has, kept for the next call. `arguments`: as fit's, for a model without
  // settings of its own yet. Returns the batch's loss before the step.
  double train_on_batch(const std::vector<std::string>& arguments, const Features& x,
                        const Labels& y, std::optional<Weights> weights);

  // The weights in Keras's order and layouts (python/ext/keras_weights.h), and their names.
  pybind11::list get_weights();
  std::vector<std::string> weight_names();
  // Replaces them, checked against get_weights()'s count and shapes, each named when it fails.
  void set_weights(const pybind11::list& arrays);
  // The rows of Keras's summary: (name, class, output shape, params, non-trainable params) per
  // layer, then the optimizer's slot values.
  pybind11::tuple summary_rows();

  // A checkpoint in `dir` (created if need be) as a training run's --train_dir holds it.
  std::string save(const std::string& dir);
  std::string export_onnx(const std::string& path);

 private:
  Engine() = default;

  // The weights: trained or loaded, else drawn from the seed as a run's first step would; during
  // a fit, the chief's at the boundary where it waits for the callbacks.
  Checkpoint current() const;
  // current() ready to run. REQUIRES: the GIL, which orders every change of built_.
  std::shared_ptr<const CheckpointModel> built();
  std::shared_ptr<const CheckpointModel> built() const;
  // Whether a fit of this engine runs and, where it waits at a boundary, may be read now.
  bool fitting() const { return running_ != nullptr; }
  bool readable_while_fitting() const;
  void refuse_while_fitting(const char* call) const;
  void refuse_unless_readable(const char* call) const;
  // A train_on_batch's state folded back into state_, before anything else trains it.
  void settle_session();

  TrainConfig config_;
  std::optional<Checkpoint> state_;
  std::filesystem::path path_ = "(a model in memory)";
  // current() ready to run; reset when it changes. Shared with the evaluations and predictions
  // still running on it, which keep it alive.
  std::shared_ptr<const CheckpointModel> built_;
  FitRun* running_ = nullptr;              // the fit under way, if any
  std::unique_ptr<BatchSession> session_;  // train_on_batch's state, between calls
};

}  // namespace dtrain::python
