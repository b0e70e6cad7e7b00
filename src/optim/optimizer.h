// Optimizers with TensorFlow's update rules. Slots (momentum accumulators, Adam's m and v) live in
// ParamSets with the parameters' layout, so an update is one pass over flat buffers and the slots
// can be checkpointed as tensors named "<var>/momentum", "<var>/adam_m", "<var>/adam_v".
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nn/param_set.h"

namespace dtrain {

struct OptimizerConfig {
  std::string name = "sgd";  // sgd | momentum | adam
  float momentum = 0.9f;
  bool use_nesterov = false;
  // TensorFlow 1.x AdamOptimizer defaults; epsilon is added to sqrt(v) ("epsilon hat" placement).
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-8f;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;
  // True for plain SGD (value -= lr·gradient), which is linear in the gradient and keeps no
  // state, so a trainer may fold it into backward instead of calling apply().
  virtual bool plain_sgd() const { return false; }

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
  // a statistic's range takes assign_deltas.
  virtual void apply_range(std::span<float> values, std::span<const float> grads,
                           std::span<const std::span<float>> slots, float lr, int64_t step) = 0;

  // Suffixes of the per-variable slots, e.g. {"adam_m", "adam_v"}; empty for SGD.
  virtual std::vector<std::string> slot_suffixes() const = 0;
  // The slot tensors, each a ParamSet named "<var>/<suffix>".
  std::vector<ParamSet>& slots() { return slots_; }
  const std::vector<ParamSet>& slots() const { return slots_; }

 protected:
  void make_slots(const std::vector<ParamSpec>& params);
  // apply_range over the arena range [begin, end), slots included.
  void apply_rule(ParamSet& params, const GradSet& grads, float lr, int64_t step, size_t begin,
                  size_t end);
  std::vector<ParamSet> slots_;
};

// The update of values that are not trainable (ParamSpec::trainable): values -= deltas, whatever
// the optimizer and its learning rate.
void assign_deltas(std::span<float> values, std::span<const float> deltas);

// REQUIRES: config.name is sgd, momentum or adam; otherwise throws UsageError.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config,
                                          const std::vector<ParamSpec>& params);
const std::vector<std::string>& optimizer_names();

}  // namespace dtrain
