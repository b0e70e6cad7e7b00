// Element types by name, size and wire byte, and typed views whose way back to floats is checked.
#include "tensor/typed_span.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <stdexcept>
#include <vector>

#include "base/error.h"
#include "tensor/element_type.h"

namespace dtrain {
namespace {

using ::testing::HasSubstr;

TEST(ElementType, NamesSizesAndWireBytesAgree) {
  EXPECT_EQ(to_string(ElementType::kFloat32), "float32");
  EXPECT_EQ(element_bytes(ElementType::kFloat32), 4u);
  EXPECT_EQ(element_bytes(ElementType::kBFloat16), 2u);
  EXPECT_EQ(element_bytes(ElementType::kFloat16), 2u);
  for (const ElementType type :
       {ElementType::kFloat32, ElementType::kBFloat16, ElementType::kFloat16}) {
    EXPECT_EQ(parse_element_type(to_string(type)), type);
    EXPECT_EQ(element_type_from_wire(static_cast<uint8_t>(type)), type);
  }
  EXPECT_EQ(parse_element_type("bf16"), ElementType::kBFloat16);
  // The wire's values are fixed: a peer's byte means the same in every build.
  EXPECT_EQ(static_cast<int>(ElementType::kFloat32), 1);
  EXPECT_EQ(static_cast<int>(Codec::kNone), 0);
}

TEST(ElementType, AnUnknownNameOrWireByteIsNamed) {
  EXPECT_THAT([] { parse_element_type("float64"); },
              ::testing::ThrowsMessage<UsageError>(HasSubstr("unknown element type 'float64'")));
  EXPECT_EQ(element_type_from_wire(0), std::nullopt);
  EXPECT_EQ(describe_element_type(9), "element type 9 (unknown to this build)");
  EXPECT_EQ(describe_element_type(2), "bfloat16");
}

TEST(TypedSpan, AFloatSpanIsAFloat32ViewOfTheSameBytes) {
  std::vector<float> values = {1.0f, 2.0f, 3.0f};
  const TypedSpan view = std::span(values);
  EXPECT_EQ(view.type(), ElementType::kFloat32);
  EXPECT_EQ(view.count(), 3u);
  EXPECT_EQ(view.size_bytes(), 12u);
  const std::span<float> floats = view.float32("a test");
  EXPECT_EQ(floats.data(), values.data());
  EXPECT_EQ(floats.size(), 3u);
  const ConstTypedSpan read_only = view;
  EXPECT_EQ(read_only.float32("a test").data(), values.data());
}

TEST(TypedSpan, OnlyFloat32ElementsBecomeFloats) {
  std::vector<float> values(2);
  const TypedSpan halves(std::as_writable_bytes(std::span(values)), ElementType::kBFloat16);
  EXPECT_EQ(halves.count(), 4u);
  EXPECT_THAT([&] { halves.float32("all-reduce"); },
              ::testing::ThrowsMessage<UsageError>(
                  HasSubstr("all-reduce works on float32 elements, not bfloat16")));
}

TEST(TypedSpan, BytesThatAreNotWholeElementsAreRefused) {
  std::vector<std::byte> bytes(6);
  EXPECT_THROW(TypedSpan(bytes, ElementType::kFloat32), std::invalid_argument);
  EXPECT_NO_THROW(TypedSpan(bytes, ElementType::kFloat16));
}

}  // namespace
}  // namespace dtrain
