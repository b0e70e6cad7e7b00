// Model construction and the forward/backward pass over its layers.
#include "nn/model.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <vector>

#include "base/error.h"
#include "nn/binary_cross_entropy.h"
#include "nn/softmax_cross_entropy.h"
#include "tensor/blas.h"
#include "tensor/ops.h"
#include "tensor/thread_team.h"

namespace dtrain {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Model::Model(std::string name, std::vector<std::unique_ptr<Layer>> layers, Loss loss)
    : name_(std::move(name)), layers_(std::move(layers)), l2_(0.0f), loss_(loss) {
  if (layers_.empty()) throw Error(fmt::format("model '{}' has no layers", name_));
  if (loss_ == Loss::kBinaryCrossEntropy && num_elements(layers_.back()->output_shape()) != 1) {
    throw Error(fmt::format("model '{}': binary cross-entropy takes one output, not {}", name_,
                            shape_string(layers_.back()->output_shape())));
  }
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (i > 0 &&
        num_elements(layers_[i]->input_shape()) != num_elements(layers_[i - 1]->output_shape())) {
      throw Error(fmt::format("model '{}': layer {} ({}) expects {} but receives {}", name_, i,
                              layers_[i]->describe(), shape_string(layers_[i]->input_shape()),
                              shape_string(layers_[i - 1]->output_shape())));
    }
    layers_[i]->set_first_param(param_specs_.size());
    for (ParamSpec& spec : layers_[i]->param_specs()) {
      l2_ = std::max(l2_, spec.l2);
      param_specs_.push_back(std::move(spec));
    }
  }
}

int64_t Model::input_size() const { return num_elements(layers_.front()->input_shape()); }

int Model::output_width() const {
  return static_cast<int>(num_elements(layers_.back()->output_shape()));
}

int Model::num_classes() const { return loss_ == Loss::kBinaryCrossEntropy ? 2 : output_width(); }

std::string Model::label_rule() const {
  if (loss_ == Loss::kBinaryCrossEntropy) {
    return "labels 0 and 1: it ends in a binary head, Dense(1, activation=\"sigmoid\") with "
           "binary_crossentropy";
  }
  return fmt::format("{} outputs, labels 0..{}", output_width(), output_width() - 1);
}

std::string Model::kernels() const {
  std::string text = gemm_kernels_line();
  for (const auto& layer : layers_) {
    const std::string chosen = layer->kernels();
    if (chosen.empty()) continue;
    const std::vector<ParamSpec> specs = layer->param_specs();
    text += fmt::format("; {}: {}", specs.empty() ? layer->describe() : specs.front().name, chosen);
  }
  return text;
}

std::vector<std::string> Model::statistics_warnings(const ParamSet& params, int64_t updates) const {
  std::vector<std::string> warnings;
  for (const auto& layer : layers_) {
    std::string warning = layer->statistics_warning(params, updates);
    if (!warning.empty()) warnings.push_back(std::move(warning));
  }
  return warnings;
}

namespace {

// The widest activation of the model, in floats per example.
size_t widest_activation(const Model& model) {
  size_t widest = 0;
  for (const auto& layer : model.layers()) {
    widest = std::max({widest, static_cast<size_t>(num_elements(layer->input_shape())),
                       static_cast<size_t>(num_elements(layer->output_shape()))});
  }
  return widest;
}

}  // namespace

Workspace::Workspace(const Model& model, int max_batch, WorkspaceUse use)
    : max_batch_(max_batch), use_(use) {
  const size_t widest = widest_activation(model);
  const size_t batch = static_cast<size_t>(max_batch);
  for (const auto& layer : model.layers()) {
    if (use == WorkspaceUse::kTraining) {
      activations_.emplace_back(static_cast<size_t>(num_elements(layer->output_shape())) * batch,
                                0.0f);
    }
    scratch_.emplace_back(layer->scratch_floats(max_batch), 0.0f);
  }
  if (use == WorkspaceUse::kInference) {
    activations_.emplace_back(widest * batch, 0.0f);
    activations_.emplace_back(widest * batch, 0.0f);
    return;
  }
  grad_a_.assign(widest * batch, 0.0f);
  grad_b_.assign(widest * batch, 0.0f);
}

int Workspace::inference_batch(const Model& model, int at_least, int up_to) {
  constexpr size_t kBufferFloats = size_t{8} << 20;  // 32 MB
  const size_t fits = kBufferFloats / std::max<size_t>(widest_activation(model), 1);
  return std::max(at_least, static_cast<int>(std::min<size_t>(fits, static_cast<size_t>(up_to))));
}

LayerIo ModelRunner::layer_io(size_t layer, const float* in, int n, bool training) {
  // splitmix64 of (step seed, layer): each layer of a step draws from its own stream.
  uint64_t z = step_seed_ + 0x9e3779b97f4a7c15ULL * (layer + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return LayerIo{.batch = n,
                 .in = in,
                 .out = ws_.output(layer),
                 .scratch = ws_.scratch_[layer].data(),
                 .training = training,
                 .seed = z ^ (z >> 31),
                 .first_example = first_example_};
}

const float* ModelRunner::forward(const ParamSet& params, const float* images, int n,
                                  bool training) {
  const PrecisionScope precision(training ? training_precision_ : evaluation_precision_);
  const float* in = images;
  const auto& layers = model_.layers();
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerIo io = layer_io(i, in, n, training);
    layers[i]->forward(params, io);
    in = io.out;
  }
  return in;
}

template <typename BackwardLayer>
float ModelRunner::train_pass(const ParamSet& params, const float* images, const int32_t* labels,
                              const float* weights, int n, StepTimes* times,
                              BackwardLayer backward_layer) {
  if (ws_.use_ != WorkspaceUse::kTraining) {
    throw std::logic_error("a training step needs a training workspace");
  }
  const PrecisionScope precision(training_precision_);  // backward's products too
  auto start = std::chrono::steady_clock::now();
  const float* logits = forward(params, images, n, /*training=*/true);
  float* dout = ws_.grad_a_.data();
  float loss = model_.loss() == Loss::kBinaryCrossEntropy
                   ? binary_cross_entropy(logits, labels, n, dout, weights)
                   : softmax_cross_entropy(logits, labels, n, model_.output_width(), dout, weights);
  if (times != nullptr) {
    times->forward_s += seconds_since(start);
    start = std::chrono::steady_clock::now();
  }
  // The loss is that of the parameters the gradients are taken at: before an SGD step changes
  // them.
  if (model_.l2() > 0.0f) loss += static_cast<float>(l2_penalty(params));

  const auto& layers = model_.layers();
  float* din = ws_.grad_b_.data();
  for (size_t i = layers.size(); i-- > 0;) {
    const float* in = i == 0 ? images : ws_.activations_[i - 1].data();
    const LayerIo io = layer_io(i, in, n, /*training=*/true);
    // Nobody needs the gradient with respect to the input images.
    backward_layer(*layers[i], io, dout, i == 0 ? nullptr : din);
    std::swap(dout, din);
  }
  if (times != nullptr) times->backward_s += seconds_since(start);
  return loss;
}

double ModelRunner::l2_penalty(const ParamSet& params) {
  // The layers add l2·w to the gradients; the loss gains l2·Σw²/2. Each thread sums the rows of
  // the weights it updates; partial sums are added in part order, so the same team size gives
  // the same loss bit for bit. Each tensor's sum is weighted by l2_p / max l2, which is exactly 1
  // when every regularised tensor shares one coefficient (all of the built-in models).
  std::vector<double>& partial = ws_.l2_partials_;
  partial.assign(static_cast<size_t>(parallel_parts()), 0.0);  // allocates once per team size
  std::span<const float> flat = params.flat();
  const double max_l2 = model_.l2();
  parallel_tensor_rows(params, [&](int part, size_t tensor, size_t begin, size_t end) {
    const float l2 = params.spec(tensor).l2;
    if (l2 == 0.0f) return;
    const double sum = sum_squares(flat.subspan(begin, end - begin));
    partial[part] += l2 == model_.l2() ? sum : l2 / max_l2 * sum;
  });
  double penalty = 0.0;
  for (double s : partial) penalty += s;
  return 0.5 * max_l2 * penalty;
}

float ModelRunner::compute_gradients(const ParamSet& params, const float* images,
                                     const int32_t* labels, int n, GradSet& grads, StepTimes* times,
                                     const float* weights) {
  return train_pass(params, images, labels, weights, n, times,
                    [&](const Layer& layer, const LayerIo& io, const float* dout, float* din) {
                      layer.backward(params, grads, io, dout, din);
                    });
}

float ModelRunner::sgd_step(ParamSet& params, const float* images, const int32_t* labels, int n,
                            GradSet& grads, float lr, StepTimes* times, const float* weights) {
  return train_pass(params, images, labels, weights, n, times,
                    [&](const Layer& layer, const LayerIo& io, const float* dout, float* din) {
                      layer.backward_sgd_step(params, grads, io, dout, din, lr);
                    });
}

void ModelRunner::predict(const ParamSet& params, const float* images, int n,
                          int32_t* predictions) {
  const float* logits = forward(params, images, n, /*training=*/false);
  if (model_.loss() == Loss::kBinaryCrossEntropy) return threshold_logits(logits, n, predictions);
  argmax_rows(logits, n, model_.output_width(), predictions);
}

double ModelRunner::accuracy(const ParamSet& params, const float* images, const int32_t* labels,
                             int64_t n) {
  std::vector<int32_t> predictions(ws_.max_batch());
  int64_t correct = 0;
  const int64_t stride = model_.input_size();
  for (int64_t begin = 0; begin < n; begin += ws_.max_batch()) {
    const int count = static_cast<int>(std::min<int64_t>(ws_.max_batch(), n - begin));
    predict(params, images + begin * stride, count, predictions.data());
    for (int i = 0; i < count; ++i) correct += predictions[i] == labels[begin + i];
  }
  return n > 0 ? static_cast<double>(correct) / static_cast<double>(n) : 0.0;
}

ModelRunner::Evaluation ModelRunner::evaluate(const ParamSet& params, const float* images,
                                              const int32_t* labels, int64_t n) {
  if (n == 0) return {};
  std::vector<int32_t> predictions(ws_.max_batch());
  const int64_t stride = model_.input_size();
  const bool binary = model_.loss() == Loss::kBinaryCrossEntropy;
  int64_t correct = 0;
  double loss_sum = 0;
  for (int64_t begin = 0; begin < n; begin += ws_.max_batch()) {
    const int count = static_cast<int>(std::min<int64_t>(ws_.max_batch(), n - begin));
    const float* out = forward(params, images + begin * stride, count, /*training=*/false);
    const float loss =
        binary ? binary_cross_entropy(out, labels + begin, count, nullptr)
               : softmax_cross_entropy(out, labels + begin, count, model_.output_width(), nullptr);
    loss_sum += static_cast<double>(loss) * count;
    if (binary) {
      threshold_logits(out, count, predictions.data());
    } else {
      argmax_rows(out, count, model_.output_width(), predictions.data());
    }
    for (int i = 0; i < count; ++i) correct += predictions[i] == labels[begin + i];
  }
  return {static_cast<double>(correct) / static_cast<double>(n), loss_sum / static_cast<double>(n)};
}

}  // namespace dtrain
