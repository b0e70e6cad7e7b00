// What a connection's link does, for the callers that choose how to use one: a protocol asks what
// a send costs, never which link it has, so that a new link needs nothing of the protocols
// (comm/connection.h says which link a connection has; comm/link_setup.h how it is chosen).
#pragma once

namespace dtrain {

struct LinkTraits {
  // Tensors move between the two ends' memories by one copy and never through a socket, whose
  // frames then stay small: a send costs a memory copy (so it may be made under a lock such a
  // copy may be held for), a sender may post many frames before reading a reply without the
  // socket filling, and the copy is work a second thread can share.
  bool in_memory = false;
};

}  // namespace dtrain
