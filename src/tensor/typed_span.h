// A view of a tensor's bytes with the element type they hold: what a gradient bucket is to the
// exchange and a chunk to the ring's links (collective/ring_links.h), so that a codec can sit
// between the two later. Only float32 is produced today; the reductions sum float32 and reach it
// through float32(), the one checked way back from bytes to floats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "tensor/element_type.h"

namespace dtrain {

// Mutable view. Invariant: bytes holds a whole number of elements of `type`.
class TypedSpan {
 public:
  TypedSpan() = default;
  // Implicit: a float span's type is float32, so the conversion loses nothing.
  TypedSpan(std::span<float> floats)  // NOLINT(google-explicit-constructor)
      : bytes_(std::as_writable_bytes(floats)) {}
  // Throws std::invalid_argument unless bytes holds whole elements of `type`.
  TypedSpan(std::span<std::byte> bytes, ElementType type);

  std::span<std::byte> bytes() const { return bytes_; }
  ElementType type() const { return type_; }
  size_t size_bytes() const { return bytes_.size(); }
  size_t count() const { return bytes_.size() / element_bytes(type_); }
  bool empty() const { return bytes_.empty(); }

  // The elements as floats. Throws UsageError unless the type is float32 (naming it and `what`,
  // the caller's operation) or the bytes are not float-aligned.
  std::span<float> float32(const char* what) const;

 private:
  std::span<std::byte> bytes_;
  ElementType type_ = ElementType::kFloat32;
};

// Read-only view, as TypedSpan.
class ConstTypedSpan {
 public:
  ConstTypedSpan() = default;
  ConstTypedSpan(std::span<const float> floats)  // NOLINT(google-explicit-constructor)
      : bytes_(std::as_bytes(floats)) {}
  ConstTypedSpan(std::span<float> floats)  // NOLINT(google-explicit-constructor)
      : bytes_(std::as_bytes(floats)) {}
  ConstTypedSpan(TypedSpan view)  // NOLINT(google-explicit-constructor)
      : bytes_(view.bytes()), type_(view.type()) {}
  ConstTypedSpan(std::span<const std::byte> bytes, ElementType type);

  std::span<const std::byte> bytes() const { return bytes_; }
  ElementType type() const { return type_; }
  size_t size_bytes() const { return bytes_.size(); }
  size_t count() const { return bytes_.size() / element_bytes(type_); }
  bool empty() const { return bytes_.empty(); }

  std::span<const float> float32(const char* what) const;

 private:
  std::span<const std::byte> bytes_;
  ElementType type_ = ElementType::kFloat32;
};

}  // namespace dtrain
