// Listening sockets bound before their server starts, by whoever picked the port: the local
// launcher binds each task's port and hands the socket to the task it starts, so that no other
// process on the machine can take the port between the pick and the task's bind.
#pragma once

#include <sys/socket.h>

namespace dtrain {

// The environment variable that names the descriptor a child inherits: "DTRAIN_LISTEN_FD=7".
inline constexpr const char* kListenFdVariable = "DTRAIN_LISTEN_FD";

// The listener this process inherited through kListenFdVariable if it is bound to `address` (a
// resolved endpoint), else -1. It is taken once; the caller owns it. One handed for the same port
// but another address (the task was told to bind elsewhere) is closed, so that the caller can bind
// the port itself.
int take_handed_listener(const sockaddr* address, socklen_t length);

}  // namespace dtrain
