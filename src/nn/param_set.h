// ParamSet: an ordered list of named float32 tensors that are views into one contiguous arena.
// Parameters live in one ParamSet and gradients in a second with the same layout, so zeroing, an
// optimizer step, a checkpoint, a push or a fused all-reduce is one pass over one flat buffer.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/tensor.h"

namespace dtrain {

// How a parameter starts (see nn/init.h).
enum class InitKind { kZeros, kTruncatedNormal, kConstant };

struct ParamSpec {
  std::string name;
  Shape shape;
  InitKind init = InitKind::kZeros;
  float init_value = 0.0f;  // stddev for kTruncatedNormal, the value for kConstant
  bool regularize = false;  // weights carry L2 regularisation; biases do not
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

// Runs an elementwise pass over every tensor of a set with this layout on the current ThreadTeam:
// fn(part, tensor, begin, end) for part p's share of each tensor's rows (its first dimension),
// cut where gemm() cuts (split_point), with [begin, end) in flat() offsets. The products of a step
// leave each core's rows of the weights in its cache; a pass that cut the arena in flat halves
// instead would move hundreds of kilobytes between the cores every step. Padding is skipped.
void parallel_tensor_rows(const ParamSet& layout,
                          const std::function<void(int, size_t, size_t, size_t)>& fn);

}  // namespace dtrain
