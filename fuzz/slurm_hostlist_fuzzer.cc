// libFuzzer target for the Slurm host-list parser (cluster/slurm_hostlist.h). Any dtrain::Error is
// the expected rejection; any other exception, a sanitizer report, running out of memory, or an
// accepted list whose hosts break the properties below is a finding.
//
// Input: the whole of it is the list.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "cluster/slurm_hostlist.h"

namespace {

void require(bool holds, const char* property) {
  if (holds) return;
  std::fprintf(stderr, "slurm_hostlist_fuzzer: accepted input breaks: %s\n", property);
  std::abort();
}

// A host name is plain text: nothing the list syntax gives a meaning to.
bool is_plain(const std::string& host) {
  return host.find_first_of("[], \t\n") == std::string::npos;
}

void check_hosts(const std::vector<std::string>& hosts) {
  require(!hosts.empty(), "an accepted list names at least one host");
  require(hosts.size() <= dtrain::kMaxSlurmHosts, "at most kMaxSlurmHosts hosts");
  for (const std::string& host : hosts) {
    require(!host.empty(), "no host name is empty");
    require(host.size() <= dtrain::kMaxSlurmHostChars, "no host name is longer than allowed");
    require(is_plain(host), "no host name holds a bracket or a separator");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view list(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> hosts;
  try {
    hosts = dtrain::expand_slurm_hostlist(list, "fuzz");
  } catch (const dtrain::Error&) {
    return 0;
  }
  check_hosts(hosts);
  // The hosts written out in full are a list of their own; a throw here escapes as a finding.
  std::string joined;
  for (const std::string& host : hosts) joined += (joined.empty() ? "" : ",") + host;
  require(dtrain::expand_slurm_hostlist(joined, "fuzz") == hosts,
          "the hosts joined with ',' expand to themselves");
  return 0;
}
