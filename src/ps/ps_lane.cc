// A ps lane's replies, and its connection made and made again.
#include "ps/ps_lane.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/error.h"
#include "comm/connect.h"

namespace dtrain {

Connection::Incoming PsLane::expect(uint16_t expected) {
  Connection::Incoming in = connection->receive();
  if (in.type == ps_protocol::kError) {
    ps_protocol::MetaReader r(in.meta);
    throw Error(r.rest_as_peer_text());
  }
  if (in.type != expected) {
    throw FrameError(fmt::format("bad reply from {}: type {} where {} was expected",
                                 connection->peer(), in.type, expected));
  }
  return in;
}

ConnectionOptions ps_connection_options(const PsClientOptions& options, int ps) {
  ConnectionOptions connection = options.connection;
  connection.task_name = fmt::format("ps{}", ps);
  connection.type_carries_tensors = ps_protocol::carries_tensors;
  connection.transport = options.transport;
  if (!connection.wait_report) connection.wait_report = options.report;
  // The ps binds this worker's pushes and done report to the connections that say it.
  if (options.worker >= 0) connection.identity = ps_protocol::worker_identity(options.worker);
  return connection;
}

PeerWait ps_wait(const PsClientOptions& options, int ps,
                 std::chrono::steady_clock::time_point deadline, const char* verb) {
  const HostPort& address = options.ps[static_cast<size_t>(ps)];
  PeerWaitOptions wait =
      connect_wait_options(address.host, address.port, ps_connection_options(options, ps));
  wait.verb = verb;
  // Every deadline here is connect_timeout_ms from when the operation began waiting for its first
  // ps: the wait ends there and says --peer_timeout's span, not what the ps before left of it.
  wait.started = deadline - wait.timeout;
  return PeerWait(std::move(wait));
}

std::unique_ptr<Connection> connect_to_ps(const PsClientOptions& options, int ps, PeerWait& wait) {
  const HostPort& address = options.ps[static_cast<size_t>(ps)];
  return connect(address.host, address.port, options.secret, ps_connection_options(options, ps),
                 wait);
}

std::unique_ptr<Connection> connect_to_ps_retrying(const PsClientOptions& options, int ps,
                                                   std::chrono::steady_clock::time_point deadline) {
  std::unique_ptr<Connection> connection;
  PeerWait wait = ps_wait(options, ps, deadline, "connect to");
  retry_connection(wait, [&] { connection = connect_to_ps(options, ps, wait); });
  return connection;
}

// connect() retries a refused connection by itself; this retries one that was accepted and then
// broke: a dying ps's listening socket may accept a connection and then reset it, a restarting
// one may be reached before it is ready, and a flooded one may drop it while it authenticates. A
// wrong secret is final: no retry changes it. Both retry within the one wait, so that its lines
// and its give-up state one clock.
void retry_connection(PeerWait& wait, const std::function<void()>& attempt) {
  for (;;) {
    try {
      attempt();
      return;
    } catch (const AuthError&) {
      throw;
    } catch (const TransportError& error) {
      if (wait.gave_up()) throw;
      wait.failed(error.what());
      if (!wait.pause()) wait.give_up();
    }
  }
}

}  // namespace dtrain
