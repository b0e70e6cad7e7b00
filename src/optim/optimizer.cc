// SGD, Momentum and Adam as TensorFlow's training ops (ApplyGradientDescent, ApplyMomentum,
// ApplyAdam) compute them; SGD with momentum, RMSprop, AdamW, Adagrad and Nadam as Keras 3's
// keras/src/optimizers/*.py do, with BaseOptimizer's clipping and weight decay. Every update runs
// over the whole arena: padding between tensors is zero in parameters, gradients and slots alike,
// and each rule maps zeros to zeros (Adagrad's padding accumulators stay 0, which its epsilon
// keeps from a division by zero).
#include "optim/optimizer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "base/error.h"

namespace dtrain {
namespace {

class Sgd : public Optimizer {
 public:
  explicit Sgd(const OptimizerConfig& config) : Optimizer(config) {}
  std::string name() const override { return "sgd"; }
  bool plain_sgd() const override { return !clips() && !decays(); }
  std::vector<std::string> slot_suffixes() const override { return {}; }

 protected:
  void update(std::span<float> values, std::span<const float> grads,
              std::span<const std::span<float>>, float lr, int64_t) override {
    float* __restrict v = values.data();
    const float* __restrict g = grads.data();
    for (size_t i = 0; i < values.size(); ++i) v[i] -= lr * g[i];
  }
};

// Keras 3's SGD with momentum > 0 (sgd.py): the velocity holds -lr·Σ, so a changed learning rate
// weighs only the gradients that follow it, unlike TensorFlow's ApplyMomentum below.
class SgdMomentum : public Optimizer {
 public:
  SgdMomentum(const OptimizerConfig& config, const std::vector<ParamSpec>& params)
      : Optimizer(config),
        momentum_(optimizer_defaults(config).momentum),
        nesterov_(config.use_nesterov) {
    make_slots(params);
  }
  std::string name() const override { return "sgd"; }
  std::vector<std::string> slot_suffixes() const override { return {"momentum"}; }

 protected:
  void update(std::span<float> values, std::span<const float> grads,
              std::span<const std::span<float>> slots, float lr, int64_t) override {
    // m = momentum·m - lr·g;  v += m  (nesterov: v += momentum·m - lr·g)
    float* __restrict v = values.data();
    const float* __restrict g = grads.data();
    float* __restrict m = slots[0].data();
    const float momentum = momentum_;
    const bool nesterov = nesterov_;
    for (size_t i = 0; i < values.size(); ++i) {
      const float gi = g[i];
      const float mi = momentum * m[i] - lr * gi;
      const float vi = v[i] + (nesterov ? momentum * mi - lr * gi : mi);
      m[i] = mi;
      v[i] = vi;
    }
  }

 private:
  float momentum_;
  bool nesterov_;
};

class Momentum : public Optimizer {
 public:
  Momentum(const OptimizerConfig& config, const std::vector<ParamSpec>& params)
      : Optimizer(config),
        momentum_(optimizer_defaults(config).momentum),
        nesterov_(config.use_nesterov) {
    make_slots(params);
  }
  std::string name() const override { return "momentum"; }
  std::vector<std::string> slot_suffixes() const override { return {"momentum"}; }

 protected:
  void update(std::span<float> values, std::span<const float> grads,
              std::span<const std::span<float>> slots, float lr, int64_t) override {
    // accum = momentum·accum + g;  v -= lr·accum  (nesterov: v -= lr·(g + momentum·accum))
    float* __restrict v = values.data();
    const float* __restrict g = grads.data();
    float* __restrict a = slots[0].data();
    const float momentum = momentum_;
    const bool nesterov = nesterov_;
    for (size_t i = 0; i < values.size(); ++i) {
      const float gi = g[i];
      const float ai = momentum * a[i] + gi;
      const float vi = v[i] - (nesterov ? lr * (gi + momentum * ai) : lr * ai);
      a[i] = ai;
      v[i] = vi;
    }
  }

 private:
  float momentum_;
  bool nesterov_;
};

// TensorFlow's ApplyAdam, which is also Keras 3's Adam (adam.py, amsgrad off): AdamW is this rule
// after BaseOptimizer's weight decay, under Keras' names and defaults.
class Adam : public Optimizer {
 public:
  Adam(const OptimizerConfig& config, const std::vector<ParamSpec>& params)
      : Optimizer(config),
        name_(config.name),
        beta1_(config.beta1),
        beta2_(config.beta2),
        epsilon_(optimizer_defaults(config).epsilon) {
    make_slots(params);
  }
  std::string name() const override { return name_; }
  std::vector<std::string> slot_suffixes() const override {
    if (name_ == "adamw") return {"momentum", "velocity"};  // Keras' names
    return {"adam_m", "adam_v"};
  }

 protected:
  void update(std::span<float> values, std::span<const float> grads,
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
    // The coefficients in locals: read through `this` in the loop, GCC cannot rule out that the
    // stores change them, and leaves the loop unvectorised.
    const float beta1 = beta1_, beta2 = beta2_, epsilon = epsilon_;
    const size_t n = values.size();
    // Every value read before any is stored: the slots and values are arenas of one layout,
    // 4096 bytes apart or a multiple, so a store to m[i] followed by a load of s[i] or v[i] looks
    // to the CPU like the same address (4K aliasing) and stalls the load. Reads first, the loop
    // ran 6 times faster (3.3 M parameters: 23.6 ms on one thread, 4.0 ms).
    for (size_t i = 0; i < n; ++i) {
      const float gi = g[i];
      const float mi = beta1 * m[i] + (1.0f - beta1) * gi;
      const float si = beta2 * s[i] + (1.0f - beta2) * gi * gi;
      const float vi = v[i] - lr_t * mi / (std::sqrt(si) + epsilon);
      m[i] = mi;
      s[i] = si;
      v[i] = vi;
    }
  }

 private:
  std::string name_;
  float beta1_, beta2_, epsilon_;
};

// Keras 3's RMSprop (rmsprop.py): ε inside the square root; momentum > 0 and centered each add a
// slot, after the velocity: {velocity[, momentum][, average_gradient]}.
class RmsProp : public Optimizer {
 public:
  RmsProp(const OptimizerConfig& config, const std::vector<ParamSpec>& params)
      : Optimizer(config),
        rho_(config.rho),
        momentum_(optimizer_defaults(config).momentum),
        epsilon_(optimizer_defaults(config).epsilon),
        centered_(config.centered) {
    make_slots(params);
  }
  std::string name() const override { return "rmsprop"; }
  std::vector<std::string> slot_suffixes() const override {
    std::vector<std::string> suffixes = {"velocity"};
    if (momentum_ > 0) suffixes.emplace_back("momentum");
    if (centered_) suffixes.emplace_back("average_gradient");
    return suffixes;
  }

 protected:
  void update(std::span<float> values, std::span<const float> grads,
              std::span<const std::span<float>> slots, float lr, int64_t) override {
    // vel = ρ·vel + (1-ρ)·g²; centered: avg = ρ·avg + (1-ρ)·g, d = vel - avg² + ε, else
    // d = vel + ε; inc = lr·g/sqrt(d); momentum: mom = momentum·mom + inc, value -= mom; else
    // value -= inc.
    float* __restrict v = values.data();
    const float* __restrict g = grads.data();
    float* __restrict vel = slots[0].data();
    float* __restrict mom = momentum_ > 0 ? slots[1].data() : nullptr;
    float* __restrict avg = centered_ ? slots[momentum_ > 0 ? 2 : 1].data() : nullptr;
    const size_t n = values.size();
    if (avg != nullptr && mom != nullptr) {
      rule<true, true>(n, v, g, vel, mom, avg, lr);
    } else if (avg != nullptr) {
      rule<true, false>(n, v, g, vel, mom, avg, lr);
    } else if (mom != nullptr) {
      rule<false, true>(n, v, g, vel, mom, avg, lr);
    } else {
      rule<false, false>(n, v, g, vel, mom, avg, lr);
    }
  }

 private:
  // One loop per variant, without branches, so that each vectorises; every value read before any
  // is stored (see Adam's update).
  template <bool kCentered, bool kMomentum>
  void rule(size_t n, float* __restrict v, const float* __restrict g, float* __restrict vel,
            float* __restrict mom, float* __restrict avg, float lr) const {
    const float rho = rho_, momentum = momentum_, epsilon = epsilon_;
    for (size_t i = 0; i < n; ++i) {
      const float gi = g[i];
      const float veli = rho * vel[i] + (1.0f - rho) * gi * gi;
      float denominator = veli + epsilon;
      float avgi = 0.0f;
      if constexpr (kCentered) {
        avgi = rho * avg[i] + (1.0f - rho) * gi;
        denominator = veli - avgi * avgi + epsilon;
      }
      const float increment = lr * gi / std::sqrt(denominator);
      float step = increment;
      if constexpr (kMomentum) step = momentum * mom[i] + increment;
      const float vi = v[i] - step;
      vel[i] = veli;
      if constexpr (kCentered) avg[i] = avgi;
      if constexpr (kMomentum) mom[i] = step;
      v[i] = vi;
    }
  }

  float rho_, momentum_, epsilon_;
  bool centered_;
};

// Keras 3's Adagrad (adagrad.py): the accumulator starts at initial_accumulator_value.
class Adagrad : public Optimizer {
 public:
  Adagrad(const OptimizerConfig& config, const std::vector<ParamSpec>& params)
      : Optimizer(config),
        initial_(config.initial_accumulator_value),
        epsilon_(optimizer_defaults(config).epsilon) {
    make_slots(params);
  }
  std::string name() const override { return "adagrad"; }
  std::vector<std::string> slot_suffixes() const override { return {"accumulator"}; }
  float slot_initial_value(size_t) const override { return initial_; }

 protected:
  void update(std::span<float> values, std::span<const float> grads,
              std::span<const std::span<float>> slots, float lr, int64_t) override {
    // acc += g²;  value -= lr·g/sqrt(acc + ε)
    float* __restrict v = values.data();
    const float* __restrict g = grads.data();
    float* __restrict acc = slots[0].data();
    const float epsilon = epsilon_;
    for (size_t i = 0; i < values.size(); ++i) {
      const float gi = g[i];
      const float acci = acc[i] + gi * gi;
      const float vi = v[i] - lr * gi / std::sqrt(acci + epsilon);
      acc[i] = acci;
      v[i] = vi;
    }
  }

 private:
  float initial_, epsilon_;
};

// Keras 3's Nadam (nadam.py): Adam with Nesterov momentum and Dozat's momentum schedule
// u_t = β1·(1 - 0.5·0.96^t). Keras keeps Π u_i in a variable; here it is a function of the step,
// so that a shard, a resumed run or a joining worker needs no extra state.
class Nadam : public Optimizer {
 public:
  Nadam(const OptimizerConfig& config, const std::vector<ParamSpec>& params)
      : Optimizer(config),
        beta1_(config.beta1),
        beta2_(config.beta2),
        epsilon_(optimizer_defaults(config).epsilon) {
    make_slots(params);
  }
  std::string name() const override { return "nadam"; }
  std::vector<std::string> slot_suffixes() const override { return {"momentum", "velocity"}; }

 protected:
  // u_t for t >= 1.
  double u(double t) const { return beta1_ * (1.0 - 0.5 * std::pow(0.96, t)); }
  // Π_{i=1..t} u_i. Past i = 1000, 0.96^i < 1e-17 and u_i is β1 to double precision.
  double u_product(int64_t t) const {
    constexpr int64_t kExact = 1000;
    double product = 1.0;
    for (int64_t i = 1; i <= std::min(t, kExact); ++i) product *= u(static_cast<double>(i));
    if (t > kExact)
      product *= std::pow(static_cast<double>(beta1_), static_cast<double>(t - kExact));
    return product;
  }

  void update(std::span<float> values, std::span<const float> grads,
              std::span<const std::span<float>> slots, float lr, int64_t step) override {
    // m += (g - m)(1-β1); v += (g² - v)(1-β2);
    // m̂ = u_{t+1}·m/(1 - Π_{t+1}) + (1 - u_t)·g/(1 - Π_t); v̂ = v/(1 - β2^t);
    // value -= lr·m̂/(sqrt(v̂) + ε), with t = step + 1.
    const int64_t t = step + 1;
    const double u_t = u(static_cast<double>(t));
    const double u_next = u(static_cast<double>(t + 1));
    const double product = u_product(t);
    const auto m_scale = static_cast<float>(u_next / (1.0 - product * u_next));
    const auto g_scale = static_cast<float>((1.0 - u_t) / (1.0 - product));
    const auto v_scale =
        static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(beta2_), double(t))));
    float* __restrict v = values.data();
    const float* __restrict g = grads.data();
    float* __restrict m = slots[0].data();
    float* __restrict s = slots[1].data();
    const float beta1 = beta1_, beta2 = beta2_, epsilon = epsilon_;
    for (size_t i = 0; i < values.size(); ++i) {
      const float gi = g[i], m0 = m[i], s0 = s[i];
      const float mi = m0 + (gi - m0) * (1.0f - beta1);
      const float si = s0 + (gi * gi - s0) * (1.0f - beta2);
      const float m_hat = m_scale * mi + g_scale * gi;
      const float vi = v[i] - lr * m_hat / (std::sqrt(si * v_scale) + epsilon);
      m[i] = mi;
      s[i] = si;
      v[i] = vi;
    }
  }

 private:
  float beta1_, beta2_, epsilon_;
};

// Keras 3's BaseOptimizer._clip_by_norm: g·c/max(‖g‖, c), a zero gradient left as it is.
void clip_to_norm(std::span<float> g, double norm, float clipnorm) {
  if (norm <= clipnorm) return;
  const auto scale = static_cast<float>(clipnorm / norm);
  for (float& x : g) x *= scale;
}

double squared_norm(std::span<const float> g) {
  double sum = 0;
  for (const float x : g) sum += static_cast<double>(x) * x;
  return sum;
}

void clip_values(std::span<float> g, float clipvalue) {
  for (float& x : g) x = std::clamp(x, -clipvalue, clipvalue);
}

void refuse(bool bad, const std::string& why) {
  if (bad) throw UsageError(why);
}

}  // namespace

EffectiveOptimizer optimizer_defaults(const OptimizerConfig& config) {
  const std::string& name = config.name;
  const bool tensorflow = name == "momentum" || name == "adam";
  return {.momentum = config.momentum.value_or(name == "momentum" ? 0.9f : 0.0f),
          .epsilon = config.epsilon.value_or(tensorflow ? 1e-8f : 1e-7f),
          .weight_decay = config.weight_decay.value_or(name == "adamw" ? 0.004f : 0.0f)};
}

Optimizer::Optimizer(const OptimizerConfig& config)
    : weight_decay_(optimizer_defaults(config).weight_decay),
      clipnorm_(config.clipnorm),
      global_clipnorm_(config.global_clipnorm),
      clipvalue_(config.clipvalue) {}

bool Optimizer::clips() const { return clipnorm_ > 0 || global_clipnorm_ > 0 || clipvalue_ > 0; }

void Optimizer::clip(GradSet& grads) const {
  if (!clips()) return;
  if (global_clipnorm_ > 0) {
    double sum = 0;
    for (size_t i = 0; i < grads.count(); ++i) {
      if (grads.spec(i).trainable) sum += squared_norm(grads.values(i));
    }
    const double norm = std::sqrt(sum);
    for (size_t i = 0; i < grads.count(); ++i) {
      if (grads.spec(i).trainable) clip_to_norm(grads.values(i), norm, global_clipnorm_);
    }
    return;
  }
  for (size_t i = 0; i < grads.count(); ++i) {
    if (grads.spec(i).trainable) clip_range(grads.values(i));
  }
}

void Optimizer::clip_range(std::span<float> grads) const {
  if (global_clipnorm_ > 0) {
    throw UsageError(fmt::format(
        "--global_clipnorm {}: needs every variable's gradient in one place, which no parameter "
        "server task has; use --clipnorm (per variable) or --clipvalue",
        global_clipnorm_));
  }
  if (clipnorm_ > 0) clip_to_norm(grads, std::sqrt(squared_norm(grads)), clipnorm_);
  if (clipvalue_ > 0) clip_values(grads, clipvalue_);
}

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

void Optimizer::apply_range(std::span<float> values, std::span<const float> grads,
                            std::span<const std::span<float>> slots, float lr, int64_t step) {
  if (weight_decay_ > 0) {
    // Keras 3's BaseOptimizer._apply_weight_decay, before the rule: value -= value·wd·lr.
    const float decay = weight_decay_ * lr;
    for (float& v : values) v -= v * decay;
  }
  update(values, grads, slots, lr, step);
}

void Optimizer::apply_rule(ParamSet& params, const GradSet& grads, float lr, int64_t step,
                           size_t begin, size_t end) {
  if (begin >= end) return;
  // A fixed array, not a vector: this runs every step and the steady state allocates nothing.
  std::array<std::span<float>, kMaxSlots> slot_ranges;
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
  const std::vector<std::string> suffixes = slot_suffixes();
  for (size_t k = 0; k < suffixes.size(); ++k) {
    std::vector<ParamSpec> specs;
    for (const ParamSpec& p : params) {
      specs.push_back(ParamSpec{.name = p.name + "/" + suffixes[k], .shape = p.shape});
    }
    ParamSet& slot = slots_.emplace_back(std::move(specs));
    // The tensors only: padding stays zero, as every rule needs.
    for (size_t i = 0; i < slot.count(); ++i) {
      std::fill(slot.values(i).begin(), slot.values(i).end(), slot_initial_value(k));
    }
  }
}

const std::vector<std::string>& optimizer_names() {
  static const std::vector<std::string> names = {"sgd",   "momentum", "adam", "rmsprop",
                                                 "adamw", "adagrad",  "nadam"};
  return names;
}

void check_optimizer_config(const OptimizerConfig& c) {
  const EffectiveOptimizer e = optimizer_defaults(c);
  const auto in_unit = [](float x) { return std::isfinite(x) && x >= 0 && x < 1; };
  refuse(!(std::isfinite(e.momentum) && e.momentum >= 0 && e.momentum <= 1),
         fmt::format("--momentum {}: must be in [0, 1]", e.momentum));
  refuse(!in_unit(c.beta1), fmt::format("--beta_1 {}: must be in [0, 1)", c.beta1));
  refuse(!in_unit(c.beta2), fmt::format("--beta_2 {}: must be in [0, 1)", c.beta2));
  refuse(!in_unit(c.rho), fmt::format("--rho {}: must be in [0, 1)", c.rho));
  refuse(!(std::isfinite(e.epsilon) && e.epsilon > 0),
         fmt::format("--epsilon {}: must be above 0", e.epsilon));
  refuse(!(std::isfinite(e.weight_decay) && e.weight_decay >= 0),
         fmt::format("--weight_decay {}: must not be negative", e.weight_decay));
  refuse(!(std::isfinite(c.initial_accumulator_value) && c.initial_accumulator_value >= 0),
         fmt::format("--initial_accumulator_value {}: must not be negative",
                     c.initial_accumulator_value));
  const std::array<std::pair<const char*, float>, 3> clips = {
      {{"--clipnorm", c.clipnorm},
       {"--global_clipnorm", c.global_clipnorm},
       {"--clipvalue", c.clipvalue}}};
  std::vector<std::string> set;
  for (const auto& [flag, value] : clips) {
    refuse(!(std::isfinite(value) && value >= 0),
           fmt::format("{} {}: must not be negative (0: off)", flag, value));
    if (value > 0) set.push_back(fmt::format("{} {}", flag, value));
  }
  // Keras 3's BaseOptimizer refuses more than one, too.
  refuse(set.size() > 1, fmt::format("{}: choose one way to clip", fmt::join(set, " and ")));
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config,
                                          const std::vector<ParamSpec>& params) {
  check_optimizer_config(config);
  const std::string& name = config.name;
  if (name == "sgd" && optimizer_defaults(config).momentum > 0)
    return std::make_unique<SgdMomentum>(config, params);
  if (name == "sgd") return std::make_unique<Sgd>(config);
  if (name == "momentum") return std::make_unique<Momentum>(config, params);
  if (name == "adam" || name == "adamw") return std::make_unique<Adam>(config, params);
  if (name == "rmsprop") return std::make_unique<RmsProp>(config, params);
  if (name == "adagrad") return std::make_unique<Adagrad>(config, params);
  if (name == "nadam") return std::make_unique<Nadam>(config, params);
  throw UsageError(fmt::format("--optimizer {}: unknown optimizer; choose one of {}", name,
                               fmt::join(optimizer_names(), ", ")));
}

}  // namespace dtrain
