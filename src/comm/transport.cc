// The names of the transports, as --transport spells them.
#include "comm/transport.h"

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace dtrain {

std::string_view transport_name(Transport transport) {
  switch (transport) {
    case Transport::kTcp:
      return "tcp";
    case Transport::kShm:
      return "shm";
    case Transport::kAuto:
      break;
  }
  return "auto";
}

Transport parse_transport(std::string_view name) {
  for (const Transport t : {Transport::kAuto, Transport::kTcp, Transport::kShm}) {
    if (name == transport_name(t)) return t;
  }
  throw std::invalid_argument(
      fmt::format("--transport {}: choose auto, tcp or shm", std::string(name)));
}

}  // namespace dtrain
