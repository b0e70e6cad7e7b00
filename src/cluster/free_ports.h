// Loopback ports for tasks that a launcher starts on this machine.
#pragma once

#include <cstdint>
#include <vector>

namespace dtrain {

// n distinct loopback ports that were free a moment ago, for tasks to bind. They come from below
// (or above) the kernel's ephemeral range, ip_local_port_range, so that no connect() and no bind
// to port 0 anywhere on the machine can take one before its task binds it; only when that range
// leaves no room are they the kernel's own picks. Tasks connect with retry, so a port taken in
// between all the same shows up as a clear "cannot listen" error, not a hang.
std::vector<uint16_t> pick_free_ports(int n);

// A listening socket on 127.0.0.1:port, close-on-exec, that the caller owns.
struct HeldPort {
  uint16_t port = 0;
  int fd = -1;
};

// As pick_free_ports, but the sockets stay bound and listening, to be handed to the tasks that
// serve on them (comm/handed_listeners.h): then no other process can take a port between the
// pick and the task's start, and peers that connect before their task is up wait in its backlog.
std::vector<HeldPort> hold_free_ports(int n);

// The band pick_free_ports draws from, [first, last], given the ephemeral range [low, high]; an
// empty band (first > last) when neither side of the range has room.
struct PortBand {
  int first = 1;
  int last = 0;
};
PortBand port_band_outside(int low, int high);

}  // namespace dtrain
