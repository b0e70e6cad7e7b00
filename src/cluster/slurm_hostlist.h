// Slurm's compressed host lists (SLURM_JOB_NODELIST: "node[01-03,7],gpu-[1-2]"), expanded to host
// names exactly as `scontrol show hostnames` (Slurm 22.05) does, by a parser of our own: dtrain
// needs no Slurm library. Reads no environment: callers pass text.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace dtrain {

// The most hosts one list may expand to. Slurm refuses a single range of more hosts; we refuse a
// whole list, before allocating any of them.
inline constexpr size_t kMaxSlurmHosts = 65536;
// The longest host name a list may make: a DNS name's limit (RFC 1035). With kMaxSlurmHosts it
// bounds what a short list can make a caller allocate.
inline constexpr size_t kMaxSlurmHostChars = 255;

// The host names `list` stands for, in scontrol's order, duplicates kept.
//
// Syntax, as scontrol reads it:
//  - Entries are separated by runs of ',', ' ', '\t' or '\n' outside brackets; leading, trailing
//    and repeated separators are ignored ("a,,b" and ",a " are fine).
//  - An entry is text with bracket groups: "rack[1-2]-node[01-03,7]". A group holds ','-separated
//    ranges, each "lo" or "lo-hi" in decimal digits; a value is zero-padded to the width of lo as
//    written ("n[098-101]": n098 ... n101; "n[01-03,7]": n01 n02 n03 n7).
//  - Several groups expand as a cartesian product. The last group varies fastest; the others nest
//    as Slurm's recursion over the text before the last group makes them: the second-to-last
//    outermost, then leftwards to the first ("a[1-2]b[3-4]" -> a1b3 a1b4 a2b3 a2b4, but
//    "a[1-2]b[3-4]c[5-6]" -> a1b3c5 a1b3c6 a2b3c5 a2b3c6 a1b4c5 ...).
//  - Nothing may follow an entry's last group ("gpu-[1-2]x" is invalid, as for scontrol).
//
// Throws UsageError, one line naming `source` (such as "SLURM_JOB_NODELIST"), the offending text
// and what is wrong, for a list scontrol rejects (backwards range "n[3-1]", empty brackets
// "n[]", an empty or non-numeric range "n[1,]" "n[a-b]", text after the last group) and also for
// lists that scontrol accepts only by accident, which never come from Slurm: one that names no
// hosts ("", ","), unbalanced or nested brackets ("n[1-2", "a]b", "n[[1]]", where scontrol makes
// names with brackets in them), anything but digits in a range ("n[ 1]", "n[+1]", "n[1a-2]",
// "n[1-]", which scontrol pads or truncates oddly), a bound of more than 19 digits, a host name
// of more than kMaxSlurmHostChars, and more than kMaxSlurmHosts hosts in all (scontrol allows
// that many per range only).
std::vector<std::string> expand_slurm_hostlist(std::string_view list, std::string_view source);

}  // namespace dtrain
