// A task's network address, as the cluster spec names it and as comm/, collective/ and ps/ connect
// to it. A plain value: cluster/cluster_spec.h parses and validates the text it comes from.
#pragma once

#include <cstdint>
#include <string>

namespace dtrain {

// Where a task listens. host is a hostname, an IPv4 address or an IPv6 address without brackets.
struct HostPort {
  std::string host;
  uint16_t port = 0;

  // "host:port", or "[host]:port" when host is an IPv6 address.
  std::string to_string() const;
  bool operator==(const HostPort&) const = default;
};

}  // namespace dtrain
