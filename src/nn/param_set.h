// ParamSet: an ordered list of named float32 tensors that are views into one contiguous arena.
// Parameters live in one ParamSet and gradients in a second with the same layout, so zeroing, an
// optimizer step, a checkpoint, a push or a fused all-reduce is one pass over one flat buffer.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/tensor.h"

namespace dtrain {

// How a parameter starts (see nn/init.h for the draws). The kinds are Keras' initialisers;
// GlorotUniform, HeNormal, LecunNormal etc. are VarianceScaling with a preset scale, mode and
// distribution, as Keras defines them.
enum class InitKind {
  kZeros,
  kOnes,
  kConstant,         // value
  kRandomNormal,     // mean, stddev
  kRandomUniform,    // minval, maxval
  kTruncatedNormal,  // mean, stddev; redraws beyond two standard deviations
  kVarianceScaling,  // scale, mode, distribution over the spec's fans
};
enum class FanMode { kFanIn, kFanOut, kFanAvg };
enum class Distribution { kTruncatedNormal, kUntruncatedNormal, kUniform };

struct InitSpec {
  InitKind kind = InitKind::kZeros;
  float value = 0.0f;
  float mean = 0.0f;
  float stddev = 0.05f;  // Keras' default for RandomNormal and TruncatedNormal
  float minval = -0.05f;
  float maxval = 0.05f;
  float scale = 1.0f;
  FanMode mode = FanMode::kFanIn;
  Distribution distribution = Distribution::kTruncatedNormal;

  static InitSpec zeros() { return {}; }
  static InitSpec constant(float v) { return {.kind = InitKind::kConstant, .value = v}; }
  static InitSpec truncated_normal(float stddev) {
    return {.kind = InitKind::kTruncatedNormal, .stddev = stddev};
  }
  static InitSpec variance_scaling(float scale, FanMode mode, Distribution distribution) {
    return {.kind = InitKind::kVarianceScaling,
            .scale = scale,
            .mode = mode,
            .distribution = distribution};
  }
  // Keras' GlorotUniform, the default kernel initialiser of Dense and Conv2D.
  static InitSpec glorot_uniform() {
    return variance_scaling(1.0f, FanMode::kFanAvg, Distribution::kUniform);
  }
  bool operator==(const InitSpec&) const = default;
};

struct ParamSpec {
  std::string name;
  Shape shape;
  InitSpec init = {};
  // L2 coefficient in TensorFlow's l2_regularizer convention: the loss gains l2·Σw²/2 and the
  // gradient l2·w. Keras' L2(x) adds x·Σw², which is l2 = 2x here. 0 for biases.
  float l2 = 0.0f;
  // Fans as Keras computes them for VarianceScaling: Dense (in, out), Conv2D (KH·KW·C_in,
  // KH·KW·C_out), a vector (n, n). Set by the layer that declares the parameter; our storage
  // layout (Dense keeps (out, in)) does not change them.
  int64_t fan_in = 0;
  int64_t fan_out = 0;
  // False for statistics a step assigns rather than descends (BatchNormalization's moving mean
  // and variance, Keras' non-trainable weights). Their gradient slot carries the step's delta,
  // and every update rule — the optimizer here, the ps, the folded SGD step — applies it as
  // value -= delta, at no learning rate: averaging deltas over towers and workers, as gradients
  // are, averages what they assign.
  bool trainable = true;
};

class ParamSet {
 public:
  ParamSet() = default;
  // Lays out the arena (each tensor starts 64-byte aligned) and zero-fills it.
  explicit ParamSet(std::vector<ParamSpec> specs);

  size_t count() const { return specs_.size(); }
  const std::vector<ParamSpec>& specs() const { return specs_; }
  const ParamSpec& spec(size_t i) const { return specs_[i]; }

  std::span<float> values(size_t i) { return {arena_.data() + offsets_[i], sizes_[i]}; }
  std::span<const float> values(size_t i) const { return {arena_.data() + offsets_[i], sizes_[i]}; }
  TensorView view(size_t i) { return {arena_.data() + offsets_[i], specs_[i].shape}; }
  // Where tensor i starts in flat().
  size_t offset(size_t i) const { return offsets_[i]; }
  // Rows of tensor i, the unit threads split it by: its first dimension, 1 for a scalar.
  size_t rows(size_t i) const {
    const Shape& shape = specs_[i].shape;
    return shape.empty() || shape[0] == 0 ? 1 : static_cast<size_t>(shape[0]);
  }

  // Index of the tensor with this name, if any.
  std::optional<size_t> find(std::string_view name) const;
  // Like find, but a missing name throws an Error naming it.
  size_t index(std::string_view name) const;

  // The whole arena, padding included (padding is always zero).
  std::span<float> flat() { return {arena_.data(), arena_.size()}; }
  std::span<const float> flat() const { return {arena_.data(), arena_.size()}; }
  void zero();
  // Copies values from a set with the same layout.
  void copy_from(const ParamSet& other);
  // Number of parameter values, padding excluded.
  int64_t num_values() const;

 private:
  std::vector<ParamSpec> specs_;
  std::vector<size_t> offsets_;
  std::vector<size_t> sizes_;
  FloatBuffer arena_;
};

// Gradients mirror the parameters' layout exactly.
using GradSet = ParamSet;

// Cuts [begin, end) of flat() at the tensors that are not trainable (moving statistics, which
// every update assigns rather than descends): trainable(lo, hi) on each run between them, even an
// empty one, and statistic(lo, hi) on each of their parts, in order. Both are flat() offsets.
template <typename Trainable, typename Statistic>
void split_at_statistics(const ParamSet& layout, size_t begin, size_t end, Trainable&& trainable,
                         Statistic&& statistic) {
  size_t at = begin;
  for (size_t t = 0; t < layout.count() && at < end; ++t) {
    if (layout.spec(t).trainable) continue;
    const size_t lo = std::max(at, layout.offset(t));
    const size_t hi = std::min(end, layout.offset(t) + layout.values(t).size());
    if (lo >= hi) continue;
    trainable(at, lo);
    statistic(lo, hi);
    at = hi;
  }
  trainable(at, end);
}

// Runs an elementwise pass over every tensor of a set with this layout on the current ThreadTeam:
// fn(part, tensor, begin, end) for part p's share of each tensor's rows (its first dimension),
// cut where gemm() cuts (split_point), with [begin, end) in flat() offsets. The products of a step
// leave each core's rows of the weights in its cache; a pass that cut the arena in flat halves
// instead would move hundreds of kilobytes between the cores every step. Padding is skipped.
void parallel_tensor_rows(const ParamSet& layout,
                          const std::function<void(int, size_t, size_t, size_t)>& fn);

}  // namespace dtrain
