// Which address a task listens on: its own address in the cluster spec when that name is this
// host's (a local cluster's "localhost", a headless Kubernetes service's name), so that a task is
// reachable where the spec says and nowhere else; otherwise every interface, since the name is
// another machine's view of this one (a NAT, a load balancer). --bind overrides either way.
#pragma once

#include <string>

#include "cluster/cluster_spec.h"

namespace dtrain {

struct BindAddress {
  std::string host;  // "127.0.0.1", "0.0.0.0", ...
  std::string why;   // for the task's first lines: "localhost is this host"
};

// REQUIRES: own.host is not empty. `bind_flag`: --bind, empty when not given.
BindAddress bind_address_for(const HostPort& own, const std::string& bind_flag);

}  // namespace dtrain
