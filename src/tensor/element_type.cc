// Names and sizes of the element types, one row each.
#include "tensor/element_type.h"

#include <fmt/format.h>

#include <array>

#include "base/error.h"

namespace dtrain {
namespace {

struct Row {
  ElementType type;
  size_t bytes;
  std::string_view name;
  std::string_view short_name;
};

constexpr std::array<Row, 3> kRows = {{
    {ElementType::kFloat32, 4, "float32", "f32"},
    {ElementType::kBFloat16, 2, "bfloat16", "bf16"},
    {ElementType::kFloat16, 2, "float16", "f16"},
}};

const Row* find(uint8_t wire) {
  for (const Row& row : kRows) {
    if (static_cast<uint8_t>(row.type) == wire) return &row;
  }
  return nullptr;
}

const Row& row_of(ElementType type) {
  const Row* row = find(static_cast<uint8_t>(type));
  if (row == nullptr) {
    throw std::invalid_argument(
        fmt::format("element type {} is not one of this build's", static_cast<int>(type)));
  }
  return *row;
}

}  // namespace

size_t element_bytes(ElementType type) { return row_of(type).bytes; }

std::string to_string(ElementType type) { return std::string(row_of(type).name); }

std::optional<ElementType> element_type_from_wire(uint8_t wire) {
  const Row* row = find(wire);
  if (row == nullptr) return std::nullopt;
  return row->type;
}

std::string describe_element_type(uint8_t wire) {
  const Row* row = find(wire);
  if (row == nullptr) return fmt::format("element type {} (unknown to this build)", wire);
  return std::string(row->name);
}

ElementType parse_element_type(std::string_view name) {
  for (const Row& row : kRows) {
    if (name == row.name || name == row.short_name) return row.type;
  }
  throw UsageError(
      fmt::format("unknown element type '{}': expected float32, bfloat16 or float16", name));
}

}  // namespace dtrain
