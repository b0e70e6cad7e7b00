// POSIX regular expressions over whole outputs: REG_NEWLINE keeps `.` and `[^x]` within a line,
// as the tests' patterns expect.
#include "support/text_match.h"

#include <regex.h>

#include <stdexcept>

namespace dtrain::testing {
namespace {

class Compiled {
 public:
  explicit Compiled(const std::string& pattern) {
    if (regcomp(&regex_, pattern.c_str(), REG_EXTENDED | REG_NEWLINE) != 0)
      throw std::invalid_argument("not a POSIX extended regular expression: " + pattern);
  }
  ~Compiled() { regfree(&regex_); }
  Compiled(const Compiled&) = delete;
  Compiled& operator=(const Compiled&) = delete;

  // The first match at or after text's start; nullopt if none. offset gets where it ends.
  std::optional<Match> next(const std::string& text, size_t& offset) const {
    std::vector<regmatch_t> groups(regex_.re_nsub + 1);
    const int flags = offset > 0 && text[offset - 1] != '\n' ? REG_NOTBOL : 0;
    if (offset > text.size() ||
        regexec(&regex_, text.c_str() + offset, groups.size(), groups.data(), flags) != 0) {
      return std::nullopt;
    }
    Match match;
    for (const regmatch_t& g : groups) {
      match.push_back(g.rm_so < 0 ? std::string()
                                  : text.substr(offset + static_cast<size_t>(g.rm_so),
                                                static_cast<size_t>(g.rm_eo - g.rm_so)));
    }
    // An empty match moves on by one, so the scan always ends.
    offset += static_cast<size_t>(groups[0].rm_eo) + (groups[0].rm_eo == groups[0].rm_so ? 1 : 0);
    return match;
  }

 private:
  regex_t regex_;
};

}  // namespace

std::optional<Match> first_match(std::string_view text, const std::string& pattern) {
  const Compiled regex(pattern);
  const std::string copy(text);  // regexec needs a terminated string
  size_t offset = 0;
  return regex.next(copy, offset);
}

std::vector<Match> all_matches(std::string_view text, const std::string& pattern) {
  const Compiled regex(pattern);
  const std::string copy(text);
  std::vector<Match> matches;
  size_t offset = 0;
  while (auto match = regex.next(copy, offset)) matches.push_back(std::move(*match));
  return matches;
}

double number_in(std::string_view text, const std::string& pattern) {
  const auto match = first_match(text, pattern);
  return match ? std::stod((*match)[1]) : -1;
}

double test_accuracy_in(std::string_view out, const std::string& prefix) {
  return number_in(out, prefix + R"(test accuracy = ([0-9.]+))");
}

std::map<int, std::string> parameter_crcs(std::string_view out) {
  std::map<int, std::string> crcs;
  for (const Match& line :
       all_matches(out, R"(worker=([0-9]+): parameters crc32c = (0x[0-9A-F]{8}))"))
    crcs[std::stoi(line[1])] = line[2];
  return crcs;
}

}  // namespace dtrain::testing
