// Finding patterns in what a child process printed, with POSIX extended regular expressions
// (regcomp/regexec). std::regex would do, but GCC 12 warns about its own code when a test is
// built with AddressSanitizer, and the suite's builds stay free of warnings.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dtrain::testing {

// A match: the whole match, then each parenthesised group ("" for a group that took no part).
using Match = std::vector<std::string>;

// The first match of `pattern` (POSIX ERE: [0-9] rather than \d) in text; nullopt if none.
// Throws std::invalid_argument naming the pattern when it does not compile.
std::optional<Match> first_match(std::string_view text, const std::string& pattern);
// Every match, left to right, none overlapping.
std::vector<Match> all_matches(std::string_view text, const std::string& pattern);
// The number the first match of `pattern` captures in its group 1; -1 when nothing matches.
double number_in(std::string_view text, const std::string& pattern);
// The accuracy of the first "<prefix>test accuracy = A" line of out; -1 when there is none.
double test_accuracy_in(std::string_view out, const std::string& prefix = "");
// Worker -> the CRC32C of its parameters, from the all-reduce workers' closing lines
// ("worker=N: parameters crc32c = 0x...").
std::map<int, std::string> parameter_crcs(std::string_view out);

}  // namespace dtrain::testing
