// The checks of a typed view: whole elements on construction, float32 and alignment on the way
// back to floats.
#include "tensor/typed_span.h"

#include <fmt/format.h>

#include <stdexcept>

#include "base/error.h"

namespace dtrain {
namespace {

void check_whole(size_t bytes, ElementType type) {
  if (bytes % element_bytes(type) != 0) {
    throw std::invalid_argument(
        fmt::format("{} bytes are not a whole number of {} elements", bytes, to_string(type)));
  }
}

void check_float32(const void* data, ElementType type, const char* what) {
  if (type != ElementType::kFloat32) {
    throw UsageError(fmt::format("{} works on float32 elements, not {}", what, to_string(type)));
  }
  if (reinterpret_cast<uintptr_t>(data) % alignof(float) != 0) {
    throw UsageError(fmt::format("{}: float32 elements that are not float-aligned", what));
  }
}

}  // namespace

TypedSpan::TypedSpan(std::span<std::byte> bytes, ElementType type) : bytes_(bytes), type_(type) {
  check_whole(bytes.size(), type);
}

std::span<float> TypedSpan::float32(const char* what) const {
  check_float32(bytes_.data(), type_, what);
  return {reinterpret_cast<float*>(bytes_.data()), bytes_.size() / sizeof(float)};
}

ConstTypedSpan::ConstTypedSpan(std::span<const std::byte> bytes, ElementType type)
    : bytes_(bytes), type_(type) {
  check_whole(bytes.size(), type);
}

std::span<const float> ConstTypedSpan::float32(const char* what) const {
  check_float32(bytes_.data(), type_, what);
  return {reinterpret_cast<const float*>(bytes_.data()), bytes_.size() / sizeof(float)};
}

}  // namespace dtrain
