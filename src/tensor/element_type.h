// The element types a tensor's bytes may hold on their way between tasks, and the codec (if any)
// that encoded them. Both travel as one byte in a frame's meta (comm/frame_format.h), so that a
// receiver knows what it got before it reads it: gradients reach the exchange as typed buckets, and
// a codec sits between them and the wire (DESIGN.md §2a).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dtrain {

// The values are the wire's: never renumber one. 0 is no type, so that a zeroed field reads as
// nothing rather than as float32.
enum class ElementType : uint8_t {
  kFloat32 = 1,
  // Known by name and size, so that a peer sending them is named; nothing produces or sums them
  // yet.
  kBFloat16 = 2,
  kFloat16 = 3,
};

// The codec that turned a bucket into the bytes on the wire; values are the wire's too. Only kNone
// exists: the field is there so that a codec lands without another frame version.
enum class Codec : uint8_t { kNone = 0 };

size_t element_bytes(ElementType type);   // 4 for float32, 2 for bf16 and f16
std::string to_string(ElementType type);  // "float32", "bfloat16", "float16"

// The type a wire byte names; nullopt for a value this build does not know.
std::optional<ElementType> element_type_from_wire(uint8_t wire);
// What a peer's byte names, for messages: "float32", or "element type 9 (unknown to this build)".
std::string describe_element_type(uint8_t wire);
// "float32", "bfloat16" (or "bf16"), "float16" (or "f16"). Throws UsageError naming the value and
// the choices.
ElementType parse_element_type(std::string_view name);

}  // namespace dtrain
