// Optimizers with TensorFlow's (sgd, momentum, adam) and Keras 3's (sgd with momentum, rmsprop,
// adamw, adagrad, nadam) update rules. Slots (momentum accumulators, Adam's m and v, ...) live in
// ParamSets with the parameters' layout, so an update is one pass over flat buffers and the slots
// can be checkpointed as tensors named "<var>/<slot>" ("<var>/adam_m", "<var>/velocity", ...).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nn/param_set.h"

namespace dtrain {

struct OptimizerConfig {
  std::string name = "sgd";  // one of optimizer_names()
  // Unset: the optimizer's own default (optimizer_defaults): momentum 0.9 for TensorFlow's
  // momentum, 0 (none) for Keras' sgd and rmsprop.
  std::optional<float> momentum = std::nullopt;
  bool use_nesterov = false;  // momentum and sgd (with momentum > 0)
  // TensorFlow 1.x AdamOptimizer defaults; epsilon is added to sqrt(v) ("epsilon hat" placement).
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  // Unset: 1e-8 for adam (TensorFlow 1.x), 1e-7 for the Keras 3 optimizers.
  std::optional<float> epsilon = std::nullopt;
  float rho = 0.9f;                        // rmsprop
  bool centered = false;                   // rmsprop
  float initial_accumulator_value = 0.1f;  // adagrad
  // Keras 3's decoupled decay, value -= value·weight_decay·lr before each update, for any
  // optimizer; unset: 0.004 for adamw, 0 (none) for the others.
  std::optional<float> weight_decay = std::nullopt;
  // Keras 3's clipping of the aggregated gradient (0: off; at most one of the three): each
  // variable's gradient to this L2 norm, all of them together to this global norm, or each value
  // into [-clipvalue, clipvalue].
  float clipnorm = 0;
  float global_clipnorm = 0;
  float clipvalue = 0;
};

// The settings an optimizer runs with: config with its unset values replaced by `name`'s defaults.
struct EffectiveOptimizer {
  float momentum, epsilon, weight_decay;
};
EffectiveOptimizer optimizer_defaults(const OptimizerConfig& config);

class Optimizer {
 public:
  explicit Optimizer(const OptimizerConfig& config);
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;
  // True for plain SGD (value -= lr·gradient) without clipping or weight decay, which is linear in
  // the gradient and keeps no state, so a trainer may fold it into backward instead of calling
  // apply().
  virtual bool plain_sgd() const { return false; }

  // True when clip() changes gradients: the trainer must aggregate the whole gradient, clip it,
  // and only then apply() it (a clipped norm needs every value of a variable).
  bool clips() const;
  // Keras 3's BaseOptimizer._clip_gradients on the aggregated gradient, in place: clipnorm per
  // variable, global_clipnorm over all of them, clipvalue per value. Trainable tensors only: a
  // statistic's gradient is the delta it is assigned, and is left alone.
  void clip(GradSet& grads) const;
  // The same on one shard of one variable (the parameter server): clipnorm needs the whole
  // variable, which the caller guarantees; global_clipnorm needs every variable and throws.
  void clip_range(std::span<float> grads) const;

  // One update of params from grads at learning rate lr. step is the 0-based number of updates
  // applied before this one (Adam's bias correction uses step + 1).
  // REQUIRES: params and grads have the layout given to make_optimizer.
  // [begin, end) limits the update to that range of the flat arena, so threads can each update
  // their own chunk of one step. The tensors that are not trainable (ParamSpec::trainable) take
  // value -= gradient instead, their gradient being the delta they are assigned. Whatever acts on
  // gradients before or inside a rule (clipping by norm or value, weight decay) acts on the
  // trainable runs of split_at_statistics only: a statistic's delta scaled or clipped would move
  // it off Keras' rule (tests/train/batch_norm_strategies_test.cc's recipes check that rule).
  void apply(ParamSet& params, const GradSet& grads, float lr, int64_t step, size_t begin = 0,
             size_t end = SIZE_MAX);

  // The same update on one contiguous range of values: the parameter server applies it per shard.
  // slots[k] is the matching range of slot k (see slot_suffixes()). For trainable values only;
  // a statistic's range takes assign_deltas. Weight decay, then the rule; no clipping (clip first).
  void apply_range(std::span<float> values, std::span<const float> grads,
                   std::span<const std::span<float>> slots, float lr, int64_t step);

  // Suffixes of the per-variable slots, e.g. {"adam_m", "adam_v"}; empty for SGD.
  virtual std::vector<std::string> slot_suffixes() const = 0;
  // The value slot k starts from: 0, but Adagrad's accumulators start at initial_accumulator_value.
  virtual float slot_initial_value(size_t /*k*/) const { return 0.0f; }
  // The slot tensors, each a ParamSet named "<var>/<suffix>".
  std::vector<ParamSet>& slots() { return slots_; }
  const std::vector<ParamSet>& slots() const { return slots_; }

  static constexpr size_t kMaxSlots = 3;  // rmsprop's velocity, momentum and average gradient

 protected:
  // The rule alone, on a trainable range: what apply_range runs after the weight decay.
  virtual void update(std::span<float> values, std::span<const float> grads,
                      std::span<const std::span<float>> slots, float lr, int64_t step) = 0;
  void make_slots(const std::vector<ParamSpec>& params);
  bool decays() const { return weight_decay_ > 0; }

 private:
  // apply_range over the arena range [begin, end), slots included.
  void apply_rule(ParamSet& params, const GradSet& grads, float lr, int64_t step, size_t begin,
                  size_t end);
  std::vector<ParamSet> slots_;
  float weight_decay_;
  float clipnorm_, global_clipnorm_, clipvalue_;
};

// The update of values that are not trainable (ParamSpec::trainable): values -= deltas, whatever
// the optimizer and its learning rate.
void assign_deltas(std::span<float> values, std::span<const float> deltas);

// REQUIRES: config.name is one of optimizer_names(); otherwise throws UsageError. Throws
// UsageError naming the flag for a hyper-parameter out of its range (--rho 1.5, two clippings).
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config,
                                          const std::vector<ParamSpec>& params);
const std::vector<std::string>& optimizer_names();
// The hyper-parameters' refusals, as make_optimizer throws them; for the flag table's check.
void check_optimizer_config(const OptimizerConfig& config);

}  // namespace dtrain
