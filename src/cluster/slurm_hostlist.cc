// Expansion of Slurm host lists in passes over plain values: split the list into entries, parse
// each entry into its text and bracket groups, count the hosts (refusing too many before any is
// made), then write them out in the order Slurm's src/common/hostlist.c produces them.
#include "cluster/slurm_hostlist.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "base/error.h"

namespace dtrain {
namespace {

// hostlist_create()'s separators. Inside brackets only ',' separates, and only ranges.
constexpr std::string_view kSeparators = ", \t\n";
// 19 digits always fit in uint64_t (10^19 - 1 < 2^64), and so does hi - lo + 1.
constexpr size_t kMaxBoundDigits = 19;
// An error quotes at most this much of the text at fault, so a fuzzer's megabyte stays one line
// a person can read.
constexpr size_t kMaxQuotedChars = 100;

// One "lo" or "lo-hi" of a group; width is the number of digits lo was written with.
struct Range {
  uint64_t lo = 0;
  uint64_t hi = 0;
  size_t width = 0;
};

// The ranges between one '[' and its ']'.
using Group = std::vector<Range>;

// One entry: texts[0] groups[0] texts[1] ... groups[n-1] texts[n]; texts.size() == n + 1, and
// texts[n] is empty when n > 0 (nothing may follow the last group). Views into the caller's list.
struct Entry {
  std::vector<std::string_view> texts;
  std::vector<Group> groups;
};

// What an error names: where the list came from, and the text at fault in it.
struct Culprit {
  std::string_view source;
  std::string_view text;
};

// text in double quotes, fit for a one-line message: bytes outside printable ASCII (a newline
// inside brackets, a tab) written as \xNN, and cut after kMaxQuotedChars.
std::string quoted(std::string_view text) {
  std::string out = "\"";
  for (const char c : text.substr(0, kMaxQuotedChars)) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte >= 0x7f) {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += c;
    }
  }
  out += text.size() > kMaxQuotedChars ? "\"..." : "\"";
  return out;
}

[[noreturn]] void fail(const Culprit& culprit, std::string_view what) {
  throw UsageError(fmt::format("{} {}: {}", culprit.source, quoted(culprit.text), what));
}

bool is_separator(char c) { return kSeparators.find(c) != std::string_view::npos; }

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// The entries of list: the non-empty runs between separators outside brackets. A '[' never
// closed keeps the rest of the list in its entry, which parse_entry then refuses.
std::vector<std::string_view> split_entries(std::string_view list) {
  std::vector<std::string_view> entries;
  bool in_brackets = false;
  size_t begin = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i] == '[') in_brackets = true;
    if (list[i] == ']') in_brackets = false;
    if (in_brackets || !is_separator(list[i])) continue;
    if (i > begin) entries.push_back(list.substr(begin, i - begin));
    begin = i + 1;
  }
  if (list.size() > begin) entries.push_back(list.substr(begin));
  return entries;
}

// One bound of range, which must be decimal digits alone: strtoul's leading spaces and sign,
// and the junk scontrol ignores after a low bound ("n[1a-2]" is n01 n02 to it), are refused.
uint64_t parse_bound(std::string_view bound, std::string_view range, const Culprit& culprit) {
  if (bound.empty()) fail(culprit, fmt::format("range {} lacks a bound", quoted(range)));
  for (const char c : bound) {
    if (!is_digit(c)) {
      fail(culprit, fmt::format("range {} has a bound {} that is not a decimal number",
                                quoted(range), quoted(bound)));
    }
  }
  if (bound.size() > kMaxBoundDigits) {
    fail(culprit, fmt::format("range {} has a bound of more than {} digits", quoted(range),
                              kMaxBoundDigits));
  }
  uint64_t value = 0;
  for (const char c : bound) value = value * 10 + static_cast<uint64_t>(c - '0');
  return value;
}

// "lo" or "lo-hi". Its width is lo's as written: the high bound's padding is ignored, as Slurm
// ignores it ("n[1-03]" is n1 n2 n3).
Range parse_range(std::string_view text, const Culprit& culprit) {
  if (text.empty()) fail(culprit, "empty range in brackets (a ',' too many?)");
  const size_t dash = text.find('-');
  const std::string_view lo = text.substr(0, dash);
  const std::string_view hi = dash == std::string_view::npos ? lo : text.substr(dash + 1);
  const Range range{parse_bound(lo, text, culprit), parse_bound(hi, text, culprit), lo.size()};
  if (range.lo > range.hi) fail(culprit, fmt::format("range {} runs backwards", text));
  if (range.hi - range.lo >= kMaxSlurmHosts) {
    fail(culprit, fmt::format("range {} names {} hosts, more than the {} a list may have", text,
                              range.hi - range.lo + 1, kMaxSlurmHosts));
  }
  return range;
}

// The text between '[' and ']': ranges separated by ','.
Group parse_group(std::string_view body, const Culprit& culprit) {
  if (body.empty()) fail(culprit, "empty brackets");
  Group group;
  size_t begin = 0;
  for (;;) {
    const size_t comma = body.find(',', begin);
    group.push_back(parse_range(body.substr(begin, comma - begin), culprit));
    if (comma == std::string_view::npos) return group;
    begin = comma + 1;
  }
}

size_t digits(uint64_t value) {
  size_t count = 1;
  for (; value >= 10; value /= 10) ++count;
  return count;
}

// The longest host name an entry makes: its text, and each group's widest value (a value has the
// width of its range's low bound as written, or its own digits where they are more).
size_t longest_host(const Entry& entry) {
  size_t length = 0;
  for (const std::string_view text : entry.texts) length += text.size();
  for (const Group& group : entry.groups) {
    size_t widest = 0;
    for (const Range& range : group) widest = std::max({widest, range.width, digits(range.hi)});
    length += widest;
  }
  return length;
}

Entry parse_entry(std::string_view entry, std::string_view source) {
  const Culprit culprit{source, entry};
  Entry parsed;
  size_t text_begin = 0;
  for (;;) {
    const size_t open = entry.find_first_of("[]", text_begin);
    if (open == std::string_view::npos) break;
    if (entry[open] == ']') fail(culprit, "']' without a '[' before it");
    const size_t close = entry.find_first_of("[]", open + 1);
    if (close == std::string_view::npos) fail(culprit, "'[' without a ']' after it");
    if (entry[close] == '[') fail(culprit, "brackets inside brackets");
    parsed.texts.push_back(entry.substr(text_begin, open - text_begin));
    parsed.groups.push_back(parse_group(entry.substr(open + 1, close - open - 1), culprit));
    text_begin = close + 1;
  }
  const std::string_view tail = entry.substr(text_begin);
  if (!parsed.groups.empty() && !tail.empty()) {
    fail(culprit, fmt::format("text {} after the last ']' (Slurm allows none)", quoted(tail)));
  }
  parsed.texts.push_back(tail);
  if (const size_t length = longest_host(parsed); length > kMaxSlurmHostChars) {
    fail(culprit, fmt::format("makes host names of {} characters, more than the {} allowed", length,
                              kMaxSlurmHostChars));
  }
  return parsed;
}

// The hosts a group stands for, or kMaxSlurmHosts + 1 for any more. Every range holds at most
// kMaxSlurmHosts, so neither this sum nor entry_size's product can overflow before it stops.
uint64_t group_size(const Group& group) {
  uint64_t size = 0;
  for (const Range& range : group) {
    size += range.hi - range.lo + 1;
    if (size > kMaxSlurmHosts) return kMaxSlurmHosts + 1;
  }
  return size;
}

uint64_t entry_size(const Entry& entry) {
  uint64_t size = 1;
  for (const Group& group : entry.groups) {
    size *= group_size(group);
    if (size > kMaxSlurmHosts) return kMaxSlurmHosts + 1;
  }
  return size;
}

// A group's values as they appear in host names, zero-padded to each range's width.
std::vector<std::string> group_values(const Group& group) {
  std::vector<std::string> values;
  for (const Range& range : group) {
    // hi < 10^19 < UINT64_MAX, so v cannot wrap past it.
    for (uint64_t v = range.lo; v <= range.hi; ++v)
      values.push_back(fmt::format("{:0{}}", v, range.width));
  }
  return values;
}

// The groups from the fastest-varying to the slowest. Slurm's _push_range_list() loops over the
// last group innermost, and makes a prefix for each value of the group before it by recursing
// over the text to its left: so after the last group come the first, the second, ..., and the
// second-to-last outermost. With two groups, that is simply the first outermost.
std::vector<size_t> groups_fastest_first(size_t groups) {
  std::vector<size_t> order;
  if (groups == 0) return order;
  order.push_back(groups - 1);
  for (size_t g = 0; g + 1 < groups; ++g) order.push_back(g);
  return order;
}

// Moves `at` (a value index per group) to the next combination, order[0] fastest, like an
// odometer; false once every combination has been visited.
bool advance(std::vector<size_t>& at, const std::vector<std::vector<std::string>>& values,
             const std::vector<size_t>& order) {
  for (const size_t g : order) {
    if (++at[g] < values[g].size()) return true;
    at[g] = 0;
  }
  return false;
}

std::string host_at(const Entry& entry, const std::vector<std::vector<std::string>>& values,
                    const std::vector<size_t>& at) {
  std::string host(entry.texts[0]);
  for (size_t g = 0; g < entry.groups.size(); ++g) {
    host += values[g][at[g]];
    host += entry.texts[g + 1];
  }
  return host;
}

void append_hosts(const Entry& entry, std::vector<std::string>& hosts) {
  std::vector<std::vector<std::string>> values;
  for (const Group& group : entry.groups) values.push_back(group_values(group));
  const std::vector<size_t> order = groups_fastest_first(entry.groups.size());
  std::vector<size_t> at(entry.groups.size(), 0);
  do {
    hosts.push_back(host_at(entry, values, at));
  } while (advance(at, values, order));
}

}  // namespace

std::vector<std::string> expand_slurm_hostlist(std::string_view list, std::string_view source) {
  const Culprit whole{source, list};
  std::vector<Entry> entries;
  for (const std::string_view entry : split_entries(list)) {
    entries.push_back(parse_entry(entry, source));
  }
  if (entries.empty()) fail(whole, "names no hosts");
  uint64_t total = 0;
  for (const Entry& entry : entries) {
    total += entry_size(entry);
    if (total > kMaxSlurmHosts) {
      fail(whole, fmt::format("expands to more than {} hosts", kMaxSlurmHosts));
    }
  }
  std::vector<std::string> hosts;
  hosts.reserve(total);
  for (const Entry& entry : entries) append_hosts(entry, hosts);
  return hosts;
}

}  // namespace dtrain
