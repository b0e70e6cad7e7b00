// Text a peer sent, made safe to print: a peer's error message, refusal reason or identity reaches
// our logs and terminal, where a newline would forge a log line and an escape sequence would
// drive the user's terminal.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace dtrain {

// Printable ASCII stays as it is; a backslash, a newline, a tab and every other byte are written
// as C escapes (\\, \n, \t, \x1b). Longer than max_bytes: cut, and "…" appended.
std::string peer_text(std::string_view text, size_t max_bytes = 1024);
std::string peer_text(std::span<const std::byte> bytes, size_t max_bytes = 1024);

}  // namespace dtrain
