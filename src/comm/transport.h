// How a connection's payloads travel (comm/link_setup.h chooses, once per connection, after the
// handshake): by value over TCP, or by reference between two processes of one host, the receiver
// copying them straight out of the sender's memory (comm/peer_memory.h, comm/memory_link.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace dtrain {

// kAuto moves payloads by reference where the peer proves its memory reachable and over TCP
// elsewhere; kTcp always over TCP; kShm requires by reference and refuses a peer with which it
// does not work, saying why.
enum class Transport { kAuto, kTcp, kShm };

std::string_view transport_name(Transport transport);  // "auto", "tcp", "shm"
// Throws std::invalid_argument naming the value and the choices.
Transport parse_transport(std::string_view name);
// What --transport accepts and what its --help says of each (plan/flags.cc): a transport added
// here is offered there without a line there.
std::vector<std::string_view> transport_names();
std::string_view transport_help();

// A peer could not have the link --transport shm requires, or refused ours (comm/link_setup.h).
// Final: no retry changes it. Not a TransportError, so that connect() does not retry it.
class LinkRefused : public Error {
 public:
  explicit LinkRefused(const std::string& what) : Error(what) {}
};

}  // namespace dtrain
