#include "base/peer_text.h"

#include <fmt/format.h>

namespace dtrain {

std::string peer_text(std::string_view text, size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes) + 8);
  for (size_t i = 0; i < text.size(); ++i) {
    if (i == max_bytes) {
      out += "…";
      break;
    }
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c >= 0x20 && c <= 0x7E) {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  return out;
}

std::string peer_text(std::span<const std::byte> bytes, size_t max_bytes) {
  return peer_text(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
                   max_bytes);
}

}  // namespace dtrain
