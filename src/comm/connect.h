// Opening a connection as a client: connect-with-retry to a task that may not listen yet, then the
// client's side of the handshake (comm/handshake.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "comm/connection.h"
#include "comm/connection_options.h"
#include "comm/peer_wait.h"

namespace dtrain {

// Connects to host:port with retry, then runs the client handshake. Retries with exponential
// backoff (comm/peer_wait.h) for options.connect_timeout_ms, so tasks may start in any order,
// saying so every options.wait_report_interval_ms; an attempt that gets no answer at all (a cut
// link drops it) is given up after options.liveness_timeout_ms and made again; then throws
// TransportError "could not reach <task> at host:port within N s (K attempts): <last error>".
// Throws AuthError if the server fails the handshake or rejects us, StopRequested as soon as
// options.stop is requested.
std::unique_ptr<Connection> connect(const std::string& host, uint16_t port, std::string_view secret,
                                    const ConnectionOptions& options);
// The same within a wait the caller owns (its deadline, reports, stop and give-up line), which
// its own retries around this one share.
std::unique_ptr<Connection> connect(const std::string& host, uint16_t port, std::string_view secret,
                                    const ConnectionOptions& options, PeerWait& wait);
// The wait connect() makes for host:port from options.
PeerWaitOptions connect_wait_options(const std::string& host, uint16_t port,
                                     const ConnectionOptions& options);

}  // namespace dtrain
