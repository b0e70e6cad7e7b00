// Model: a stack of layers ending in its loss — softmax cross-entropy over C logits, or binary
// cross-entropy over one (a binary head) — with its named parameters declared once. A Model holds
// no parameter values and no buffers: values live in a ParamSet and per-batch buffers in a
// Workspace, so one Model can serve several towers (threads) at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/layer.h"
#include "nn/param_set.h"
#include "tensor/aligned.h"
#include "tensor/blas.h"

namespace dtrain {

enum class Loss {
  kSoftmaxCrossEntropy,  // C logits, labels 0..C-1, the class is the largest logit
  kBinaryCrossEntropy,   // one logit, labels 0 and 1, the class is 1 where sigmoid(logit) >= 0.5
};

class Model {
 public:
  // Each parameter carries its own L2 coefficient (ParamSpec::l2, TensorFlow's l2_regularizer
  // convention): loss += Σ_p l2_p · Σ w_p²/2.
  // A binary cross-entropy model's last layer has one output.
  Model(std::string name, std::vector<std::unique_ptr<Layer>> layers,
        Loss loss = Loss::kSoftmaxCrossEntropy);
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const std::string& name() const { return name_; }
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  const std::vector<ParamSpec>& param_specs() const { return param_specs_; }
  int64_t input_size() const;  // floats per example
  Loss loss() const { return loss_; }
  int output_width() const;  // logits per example: the width of the last layer
  int num_classes() const;   // labels are 0..num_classes()-1: the width, or 2 for a binary head
  // What the labels may be, for messages: "labels 0..9", or the binary head's "labels 0 and 1".
  std::string label_rule() const;
  // The kernels that compute this model, for the configuration line: BLAS's kernel family, then
  // each layer that chooses its own, e.g. "OpenBLAS SkylakeX; conv2_w: oneDNN jit:avx512_core".
  std::string kernels() const;
  // The largest L2 coefficient of any parameter (0 without regularisation), for the start-up line.
  float l2() const { return l2_; }
  // Each layer's Layer::statistics_warning for these parameters after `updates` updates, the
  // empty ones left out.
  std::vector<std::string> statistics_warnings(const ParamSet& params, int64_t updates) const;

 private:
  std::string name_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<ParamSpec> param_specs_;
  float l2_;
  Loss loss_;
};

// What a Workspace is for. Training keeps every layer's output for backward; inference (evaluation,
// prediction) needs only the layer it runs and its input, so two buffers take turns and there are
// no gradient buffers: for an MLP with wide layers, this is most of a worker's memory.
enum class WorkspaceUse { kTraining, kInference };

// Activations, their gradients and layer scratch for batches of up to max_batch examples. Allocated
// once; a training step allocates nothing.
class Workspace {
 public:
  Workspace(const Model& model, int max_batch, WorkspaceUse use = WorkspaceUse::kTraining);
  int max_batch() const { return max_batch_; }
  // The largest batch an inference workspace should take: at least `at_least` and, up to `up_to`,
  // as many examples as keep its two buffers at 32 MB each.
  static int inference_batch(const Model& model, int at_least, int up_to);

 private:
  friend class ModelRunner;
  float* output(size_t layer) {
    return activations_[use_ == WorkspaceUse::kTraining ? layer : layer % 2].data();
  }

  int max_batch_;
  WorkspaceUse use_;
  std::vector<FloatBuffer> activations_;  // training: output of layer i; inference: two in turn
  std::vector<FloatBuffer> scratch_;      // scratch of layer i
  FloatBuffer grad_a_, grad_b_;           // ping-pong buffers for dLoss/d(activation)
  std::vector<double> l2_partials_;       // per-thread sums of the L2 penalty
};

// Where one step's time went, for `dtrain bench train`.
struct StepTimes {
  double forward_s = 0;
  double backward_s = 0;
  double update_s = 0;
};

// Runs a Model over batches with the given buffers. Stateless apart from the references it holds.
class ModelRunner {
 public:
  ModelRunner(const Model& model, Workspace& workspace) : model_(model), ws_(workspace) {}

  // The randomness of the next training passes (dropout): the step's seed, and the index in the
  // whole step's batch of the first example this runner sees (a tower's offset). Evaluation
  // (predict, accuracy) never draws.
  void set_step_randomness(uint64_t step_seed, int64_t first_example) {
    step_seed_ = step_seed;
    first_example_ = first_example;
  }

  // The precision of the products of training passes (compute_gradients, sgd_step) and of
  // evaluation's (logits, predict, accuracy, evaluate); fp32 unless set (tensor/blas.h).
  void set_precision(Precision training, Precision evaluation = Precision::kFp32) {
    training_precision_ = training;
    evaluation_precision_ = evaluation;
  }

  // Forward, loss and backward over n examples (images (n, input_size), labels (n)). Writes the
  // gradient of the mean loss, L2 term included, into grads and returns that loss. weights (n),
  // where given, weigh each example's loss (softmax_cross_entropy says how); null: all 1.
  // REQUIRES: n <= workspace.max_batch(); grads has the model's layout.
  float compute_gradients(const ParamSet& params, const float* images, const int32_t* labels, int n,
                          GradSet& grads, StepTimes* times = nullptr,
                          const float* weights = nullptr);

  // The same pass with one plain SGD step folded into backward (see Layer::backward_sgd_step):
  // params become params - lr·gradient, grads is scratch. Returns the loss before the step.
  float sgd_step(ParamSet& params, const float* images, const int32_t* labels, int n,
                 GradSet& grads, float lr, StepTimes* times = nullptr,
                 const float* weights = nullptr);

  // Forward only: the logits of the n examples, (n, output_width) row-major, valid until the next
  // pass of this runner. REQUIRES: n <= workspace.max_batch().
  const float* logits(const ParamSet& params, const float* images, int n) {
    return forward(params, images, n, /*training=*/false);
  }
  // Forward only: the predicted class of each example into predictions (n).
  void predict(const ParamSet& params, const float* images, int n, int32_t* predictions);

  // Fraction of the n examples whose prediction equals the label, in batches of max_batch.
  double accuracy(const ParamSet& params, const float* images, const int32_t* labels, int64_t n);

  // The same pass, with the mean of the model's loss over the n examples (the L2 term left out:
  // it says nothing about held-out data). The accuracy equals accuracy()'s.
  struct Evaluation {
    double accuracy = 0;
    double loss = 0;
  };
  Evaluation evaluate(const ParamSet& params, const float* images, const int32_t* labels,
                      int64_t n);

 private:
  const float* forward(const ParamSet& params, const float* images, int n, bool training);
  LayerIo layer_io(size_t layer, const float* in, int n, bool training);
  // Forward, loss, L2 penalty, then backward_layer(layer, io, dout, din) from the last layer to
  // the first. Returns the loss.
  template <typename BackwardLayer>
  float train_pass(const ParamSet& params, const float* images, const int32_t* labels,
                   const float* weights, int n, StepTimes* times, BackwardLayer backward_layer);
  // Σ_p l2_p·Σw_p²/2.
  double l2_penalty(const ParamSet& params);

  const Model& model_;
  Workspace& ws_;
  uint64_t step_seed_ = 0;
  int64_t first_example_ = 0;
  Precision training_precision_ = Precision::kFp32;
  Precision evaluation_precision_ = Precision::kFp32;
};

}  // namespace dtrain
