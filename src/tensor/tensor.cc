// Tensor storage and shape helpers.
#include "tensor/tensor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"

namespace dtrain {

int64_t num_elements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_string(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

Tensor::Tensor(Shape shape) : shape_(std::move(shape)), data_(num_elements(shape_), 0.0f) {}

void Tensor::reshape(Shape shape) {
  if (num_elements(shape) != size()) {
    throw Error(fmt::format("cannot reshape a tensor of shape {} to {}", shape_string(shape_),
                            shape_string(shape)));
  }
  shape_ = std::move(shape);
}

void Tensor::resize(Shape shape) {
  data_.resize(num_elements(shape));
  shape_ = std::move(shape);
}

}  // namespace dtrain
