// SGD, Momentum and Adam as TensorFlow's training ops (ApplyGradientDescent, ApplyMomentum,
// ApplyAdam) compute them. Every update runs over the whole arena: padding between tensors is zero
// in parameters, gradients and slots alike, and each rule maps zeros to zeros.
#include "optim/optimizer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "base/error.h"

namespace dtrain {
namespace {

class Sgd : public Optimizer {
 public:
  std::string name() const override { return "sgd"; }
  bool plain_sgd() const override { return true; }
  std::vector<std::string> slot_suffixes() const override { return {}; }
  void apply_range(std::span<float> values, std::span<const float> grads,
                   std::span<const std::span<float>>, float lr, int64_t) override {
    float* __restrict v = values.data();
    const float* __restrict g = grads.data();
    for (size_t i = 0; i < values.size(); ++i) v[i] -= lr * g[i];
  }
};

class Momentum : public Optimizer {
 public:
  Momentum(const OptimizerConfig& config, const std::vector<ParamSpec>& params)
      : momentum_(config.momentum), nesterov_(config.use_nesterov) {
    make_slots(params);
  }
  std::string name() const override { return "momentum"; }
  std::vector<std::string> slot_suffixes() const override { return {"momentum"}; }
  void apply_range(std::span<float> values, std::span<const float> grads,
                   std::span<const std::span<float>> slots, float lr, int64_t) override {
    // accum = momentum·accum + g;  v -= lr·accum  (nesterov: v -= lr·(g + momentum·accum))
    float* __restrict v = values.data();
    const float* __restrict g = grads.data();
    float* __restrict a = slots[0].data();
    for (size_t i = 0; i < values.size(); ++i) {
      a[i] = momentum_ * a[i] + g[i];
      v[i] -= nesterov_ ? lr * (g[i] + momentum_ * a[i]) : lr * a[i];
    }
  }

 private:
  float momentum_;
  bool nesterov_;
};

class Adam : public Optimizer {
 public:
  Adam(const OptimizerConfig& config, const std::vector<ParamSpec>& params)
      : beta1_(config.beta1), beta2_(config.beta2), epsilon_(config.epsilon) {
    make_slots(params);
  }
  std::string name() const override { return "adam"; }
  std::vector<std::string> slot_suffixes() const override { return {"adam_m", "adam_v"}; }
  void apply_range(std::span<float> values, std::span<const float> grads,
                   std::span<const std::span<float>> slots, float lr, int64_t step) override {
    // TensorFlow: lr_t = lr·sqrt(1-β2^t)/(1-β1^t); m = β1·m + (1-β1)·g; v = β2·v + (1-β2)·g²;
    // value -= lr_t·m/(sqrt(v) + ε), with t = step + 1 and ε outside the bias correction.
    const double t = static_cast<double>(step + 1);
    const float lr_t =
        static_cast<float>(lr * std::sqrt(1.0 - std::pow(beta2_, t)) / (1.0 - std::pow(beta1_, t)));
    float* __restrict v = values.data();
    const float* __restrict g = grads.data();
    float* __restrict m = slots[0].data();
    float* __restrict s = slots[1].data();
    for (size_t i = 0; i < values.size(); ++i) {
      m[i] = beta1_ * m[i] + (1.0f - beta1_) * g[i];
      s[i] = beta2_ * s[i] + (1.0f - beta2_) * g[i] * g[i];
      v[i] -= lr_t * m[i] / (std::sqrt(s[i]) + epsilon_);
    }
  }

 private:
  float beta1_, beta2_, epsilon_;
};

}  // namespace

void Optimizer::apply(ParamSet& params, const GradSet& grads, float lr, int64_t step, size_t begin,
                      size_t end) {
  end = std::min(end, params.flat().size());
  // The range, cut around the tensors that are not trainable: the optimizer's rule between them,
  // assign_deltas on them.
  split_at_statistics(
      params, begin, end,
      [&](size_t lo, size_t hi) { apply_rule(params, grads, lr, step, lo, hi); },
      [&](size_t lo, size_t hi) {
        assign_deltas(params.flat().subspan(lo, hi - lo), grads.flat().subspan(lo, hi - lo));
      });
}

void Optimizer::apply_rule(ParamSet& params, const GradSet& grads, float lr, int64_t step,
                           size_t begin, size_t end) {
  if (begin >= end) return;
  // A fixed array, not a vector: this runs every step and the steady state allocates nothing.
  std::array<std::span<float>, 2> slot_ranges;
  for (size_t k = 0; k < slots_.size(); ++k)
    slot_ranges.at(k) = slots_[k].flat().subspan(begin, end - begin);
  apply_range(params.flat().subspan(begin, end - begin), grads.flat().subspan(begin, end - begin),
              std::span<const std::span<float>>(slot_ranges.data(), slots_.size()), lr, step);
}

void assign_deltas(std::span<float> values, std::span<const float> deltas) {
  float* __restrict v = values.data();
  const float* __restrict d = deltas.data();
  for (size_t i = 0; i < values.size(); ++i) v[i] -= d[i];
}

void Optimizer::make_slots(const std::vector<ParamSpec>& params) {
  for (const std::string& suffix : slot_suffixes()) {
    std::vector<ParamSpec> specs;
    for (const ParamSpec& p : params) {
      specs.push_back(ParamSpec{.name = p.name + "/" + suffix, .shape = p.shape});
    }
    slots_.emplace_back(std::move(specs));
  }
}

const std::vector<std::string>& optimizer_names() {
  static const std::vector<std::string> names = {"sgd", "momentum", "adam"};
  return names;
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config,
                                          const std::vector<ParamSpec>& params) {
  if (config.name == "sgd") return std::make_unique<Sgd>();
  if (config.name == "momentum") return std::make_unique<Momentum>(config, params);
  if (config.name == "adam") return std::make_unique<Adam>(config, params);
  throw UsageError(fmt::format("--optimizer {}: unknown optimizer; choose one of {}", config.name,
                               fmt::join(optimizer_names(), ", ")));
}

}  // namespace dtrain
