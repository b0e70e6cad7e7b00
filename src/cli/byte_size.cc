// Parsing and printing byte counts for the bench commands.
#include "cli/byte_size.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <iterator>
#include <limits>

#include "base/error.h"

namespace dtrain::cli {

namespace {

// The shift of a binary multiple, or -1. Decimal units ("KB") are refused rather than guessed.
int suffix_shift(std::string_view suffix) {
  std::string lower(suffix);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.empty() || lower == "b") return 0;
  if (lower == "kib") return 10;
  if (lower == "mib") return 20;
  if (lower == "gib") return 30;
  return -1;
}

}  // namespace

std::string format_bytes(uint64_t bytes) {
  constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  for (; value >= 1024 && unit + 1 < std::size(kUnits); ++unit) value /= 1024;
  return fmt::format("{:g} {}", value, kUnits[unit]);
}

uint64_t parse_byte_size(std::string_view text, std::string_view flag) {
  const auto bad = [&] {
    return UsageError(fmt::format(
        "{} '{}': expected a byte count such as 4096, 64KiB, 16MiB or 1GiB", flag, text));
  };
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  uint64_t count = 0;
  const std::from_chars_result parsed = std::from_chars(text.data(), text.data() + digits, count);
  if (digits == 0 || parsed.ec != std::errc()) throw bad();
  const int shift = suffix_shift(text.substr(digits));
  if (shift < 0 || count > (std::numeric_limits<uint64_t>::max() >> shift)) throw bad();
  return count << shift;
}

}  // namespace dtrain::cli
