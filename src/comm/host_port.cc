// IPv6 hosts are bracketed so that the port's colon stays unambiguous (RFC 3986's authority form).
#include "comm/host_port.h"

#include <fmt/format.h>

namespace dtrain {

std::string HostPort::to_string() const {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

}  // namespace dtrain
