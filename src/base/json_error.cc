// Byte offsets to lines and columns, and nlohmann's messages without its bracketed ids.
#include "base/json_error.h"

#include <fmt/format.h>

#include <algorithm>

namespace dtrain {

TextPosition text_position(std::string_view text, size_t offset) {
  TextPosition at;
  const size_t end = std::min(offset, text.size());
  for (size_t i = 0; i < end; ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte == '\n') {
      ++at.line;
      at.column = 1;
    } else if ((byte & 0xC0) != 0x80) {
      ++at.column;
    }
  }
  return at;
}

std::string describe_position(std::string_view text, size_t offset) {
  const TextPosition at = text_position(text, offset);
  return fmt::format("line {}, column {}", at.line, at.column);
}

std::string describe_json_error(std::string_view text, const nlohmann::json::exception& error) {
  // "[json.exception.parse_error.101] parse error at line 1, column 2: syntax error ...": the
  // bracketed id means nothing to a user, and the place is said here, in characters.
  std::string_view what = error.what();
  if (const size_t id_end = what.find("] "); id_end != std::string_view::npos)
    what.remove_prefix(id_end + 2);
  const auto* parse_error = dynamic_cast<const nlohmann::json::parse_error*>(&error);
  if (parse_error == nullptr) return std::string(what);
  if (const size_t place_end = what.find(": "); place_end != std::string_view::npos)
    what.remove_prefix(place_end + 2);
  // `byte` counts from 1: the character the parser read last, the one at fault.
  const size_t offset = parse_error->byte > 0 ? parse_error->byte - 1 : 0;
  return fmt::format("{}: {}", describe_position(text, offset), what);
}

}  // namespace dtrain
