// Byte counts as the bench flags take them and the reports print them: binary units only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace dtrain::cli {

// "4096", "64KiB", "16MiB", "1GiB" (the suffix in any case, "B" allowed) -> bytes. Throws
// UsageError naming `flag` for anything else, or for a count that does not fit in 64 bits.
uint64_t parse_byte_size(std::string_view text, std::string_view flag);

// 65536 -> "64 KiB", 1536 -> "1.5 KiB".
std::string format_bytes(uint64_t bytes);

}  // namespace dtrain::cli
