// Where JSON text that dtrain reads from a file or a variable goes wrong, as a person finds it: a
// line and a column rather than the parser's byte offset.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace dtrain {

// Line and column, both from 1, of the byte at `offset` in text. A column counts characters: the
// bytes that continue a UTF-8 sequence do not count. An offset past the end is the end.
struct TextPosition {
  size_t line = 1;
  size_t column = 1;
};
TextPosition text_position(std::string_view text, size_t offset);

// "line 3, column 14".
std::string describe_position(std::string_view text, size_t offset);

// Why text did not parse, from the exception nlohmann::json::parse threw on it: "line 3, column
// 14: syntax error while parsing object key - unexpected '}'; expected string literal"; without a
// place for an error that has none (a number too large for a double).
std::string describe_json_error(std::string_view text, const nlohmann::json::exception& error);

}  // namespace dtrain
