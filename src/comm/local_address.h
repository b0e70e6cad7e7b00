// Which of this host's addresses another host reaches it at: the one its packets to that host
// leave from. For processes that must publish an address for their peers without being told one
// (a torch.distributed rank that knows only where the Store is).
#pragma once

#include <string>

namespace dtrain {

// The numeric address of the interface this host would use to reach `host` (a name or an
// address): "127.0.0.1" for "localhost", this host's LAN address for a peer on the LAN. Sends
// nothing. Throws TransportError naming `host` when it does not resolve or no route leads there.
std::string local_address_toward(const std::string& host);

// The numeric address of this end of the connected socket `fd`: the interface through which its
// peer is reached, and so one that peer's other peers on that network can reach too. Throws
// TransportError.
std::string local_address_of(int fd);

}  // namespace dtrain
