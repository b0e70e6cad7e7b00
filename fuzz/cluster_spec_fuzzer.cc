// libFuzzer target for the cluster-spec parsers (cluster/cluster_spec.h): TF_CONFIG, the cluster
// object of a JSON file, and the tutorials' host lists and flags. UsageError (any dtrain::Error) is
// the expected rejection; any other exception, a sanitizer report, or an accepted spec that fails
// validation or does not round-trip through its own text form is a finding.
//
// Input: byte 0 picks the parser, byte 1 is the task index for the flags; the rest is the text.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "cluster/cluster_spec.h"

namespace {

void require(bool holds, const char* property) {
  if (holds) return;
  std::fprintf(stderr, "cluster_spec_fuzzer: accepted input breaks: %s\n", property);
  std::abort();
}

void check_addresses_round_trip(const dtrain::ClusterSpec& cluster) {
  for (const std::string& job : cluster.jobs()) {
    require(!cluster.tasks(job).empty(), "a listed job has tasks");
    for (const dtrain::HostPort& hp : cluster.tasks(job)) {
      require(dtrain::parse_host_port("fuzz", hp.to_string()) == hp,
              "an address parses back from its to_string()");
    }
  }
}

void fuzz_tf_config(std::string_view text) {
  dtrain::ClusterConfig config;
  try {
    config = dtrain::cluster_from_tf_config(text);
  } catch (const dtrain::Error&) {
    return;
  }
  dtrain::validate_cluster_config(config, "fuzz");
  check_addresses_round_trip(config.cluster);
  // to_tf_config promises a round trip; a throw here escapes as a finding.
  const dtrain::ClusterConfig again = dtrain::cluster_from_tf_config(dtrain::to_tf_config(config));
  require(again.cluster == config.cluster && again.task == config.task,
          "TF_CONFIG round-trips through to_tf_config");
}

void fuzz_cluster_json(std::string_view text) {
  dtrain::ClusterSpec cluster;
  try {
    cluster = dtrain::cluster_spec_from_json(text, "fuzz.json");
  } catch (const dtrain::Error&) {
    return;
  }
  check_addresses_round_trip(cluster);
}

void fuzz_host_list(std::string_view text) {
  std::vector<dtrain::HostPort> hosts;
  try {
    hosts = dtrain::parse_host_list("--worker_hosts", text);
  } catch (const dtrain::Error&) {
    return;
  }
  std::string joined;
  for (const dtrain::HostPort& hp : hosts) joined += (joined.empty() ? "" : ",") + hp.to_string();
  require(dtrain::parse_host_list("--worker_hosts", joined) == hosts,
          "a host list parses back from its entries' to_string()");
}

// The tutorials' four flags, as "ps_hosts\nworker_hosts\njob_name" and a task index byte.
void fuzz_flags(std::string_view text, uint8_t index_byte) {
  const size_t first = text.find('\n');
  const size_t second = first == text.npos ? text.npos : text.find('\n', first + 1);
  if (second == text.npos) return;
  dtrain::ClusterConfig config;
  try {
    config = dtrain::cluster_from_flags(text.substr(0, first),
                                        text.substr(first + 1, second - first - 1),
                                        text.substr(second + 1), static_cast<int8_t>(index_byte));
  } catch (const dtrain::Error&) {
    return;
  }
  require(config.cluster.has_task(config.task), "the flags' task is in the cluster");
  check_addresses_round_trip(config.cluster);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);
  switch (data[0] % 4) {
    case 0:
      fuzz_tf_config(text);
      break;
    case 1:
      fuzz_cluster_json(text);
      break;
    case 2:
      fuzz_host_list(text);
      break;
    case 3:
      fuzz_flags(text, data[1]);
      break;
  }
  return 0;
}
