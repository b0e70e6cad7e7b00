// Shapes and tensor views. A TensorView is a float32 pointer plus a shape over contiguous row-major
// storage it does not own; Tensor owns its storage. Layers, optimizers and checkpoints work on
// views so that parameters can live in one arena (see nn/param_set.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tensor/aligned.h"

namespace dtrain {

using Shape = std::vector<int64_t>;

// Product of the dimensions; 1 for a scalar (empty shape).
int64_t num_elements(const Shape& shape);
// "[100, 784]"
std::string shape_string(const Shape& shape);

struct TensorView {
  float* data = nullptr;
  Shape shape;

  int64_t size() const { return num_elements(shape); }
  std::span<float> span() const { return {data, static_cast<size_t>(size())}; }
  // Dimension i; negative counts from the end.
  int64_t dim(int i) const { return shape[i < 0 ? shape.size() + i : i]; }
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Shape shape);  // zero-filled

  const Shape& shape() const { return shape_; }
  int64_t size() const { return static_cast<int64_t>(data_.size()); }
  float* data() { return data_.data(); }
  const float* data() const { return data_.data(); }
  std::span<float> span() { return {data_.data(), data_.size()}; }
  std::span<const float> span() const { return {data_.data(), data_.size()}; }
  TensorView view() { return {data_.data(), shape_}; }
  // Reinterprets the storage; the new shape must hold the same number of elements.
  void reshape(Shape shape);
  // Changes shape and storage size, keeping capacity; contents unspecified.
  void resize(Shape shape);

 private:
  Shape shape_;
  FloatBuffer data_;
};

}  // namespace dtrain
