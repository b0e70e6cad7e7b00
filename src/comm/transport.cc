// The names of the transports, as --transport spells them.
#include "comm/transport.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

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

namespace {

constexpr Transport kTransports[] = {Transport::kAuto, Transport::kTcp, Transport::kShm};

}  // namespace

Transport parse_transport(std::string_view name) {
  for (const Transport t : kTransports) {
    if (name == transport_name(t)) return t;
  }
  throw std::invalid_argument(fmt::format("--transport {}: choose one of {}", std::string(name),
                                          fmt::join(transport_names(), ", ")));
}

std::vector<std::string_view> transport_names() {
  std::vector<std::string_view> names;
  for (const Transport t : kTransports) names.push_back(transport_name(t));
  return names;
}

std::string_view transport_help() {
  return "How payloads move between tasks on the same host (all-reduce chunks; a worker's "
         "gradients and values to and from a ps): auto (copied straight out of or into the other "
         "task's memory where the kernel allows it, else TCP), tcp, or shm (memory only; a pair "
         "that cannot is an error)";
}

}  // namespace dtrain
