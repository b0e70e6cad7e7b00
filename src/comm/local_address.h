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

}  // namespace dtrain
