// A bound on the nesting of JSON text that dtrain reads from files (model specs, checkpoint
// headers), checked before the text is parsed: copying, comparing and printing a JSON value all
// recurse once per level, so a file of a million '[' would overflow the stack.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace dtrain {

// Far deeper than any file dtrain reads: a Keras model nests about 8 levels, the config of a
// checkpoint, which holds one, about 12.
inline constexpr int kMaxJsonNesting = 64;

// The offset of the first '[' or '{' that opens level max_depth + 1 of text's arrays and objects,
// or nullopt when none does. Brackets inside strings do not count. One pass, no recursion; text
// need not be valid JSON (the parser judges that afterwards).
std::optional<size_t> find_json_nesting_beyond(std::string_view text, int max_depth);

}  // namespace dtrain
