// Connect-with-retry around the client's handshake.
#include "comm/connect.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "base/error.h"
#include "comm/tcp_stream.h"

namespace dtrain {

namespace {

std::string peer_address(const std::string& host, uint16_t port) {
  const bool v6_literal = host.find(':') != std::string::npos;
  return v6_literal ? fmt::format("[{}]:{}", host, port) : fmt::format("{}:{}", host, port);
}

}  // namespace

PeerWaitOptions connect_wait_options(const std::string& host, uint16_t port,
                                     const ConnectionOptions& options) {
  return {.peer = options.task_name.empty() ? "the peer" : options.task_name,
          .address = peer_address(host, port),
          .verb = "reach",
          .timeout = std::chrono::milliseconds(options.connect_timeout_ms),
          .started = std::nullopt,
          .report_interval = std::chrono::milliseconds(options.wait_report_interval_ms),
          .report = options.wait_report,
          .stop = options.stop,
          .abandon = options.abandon_wait};
}

std::unique_ptr<Connection> connect(const std::string& host, uint16_t port, std::string_view secret,
                                    const ConnectionOptions& options) {
  PeerWait wait(connect_wait_options(host, port, options));
  return connect(host, port, secret, options, wait);
}

std::unique_ptr<Connection> connect(const std::string& host, uint16_t port, std::string_view secret,
                                    const ConnectionOptions& options, PeerWait& wait) {
  if (secret.empty()) throw UsageError("cannot connect: the cluster secret is empty");
  for (;;) {
    wait.check_stop();
    // The kernel resends an unanswered SYN ever more slowly (1, 3, 7, 15 s …); a fresh attempt
    // reaches a peer whose link has come back sooner.
    const auto attempt_until =
        options.liveness_timeout_ms > 0
            ? std::min(wait.deadline(),
                       SteadyClock::now() + std::chrono::milliseconds(options.liveness_timeout_ms))
            : wait.deadline();
    std::string error;
    if (auto stream =
            TcpStream::try_connect(host, port, attempt_until, options.tcp_congestion, error)) {
      // A handshake that breaks is retried like a refused connect: a flooded server sheds the
      // oldest handshakes, a restarting one may reset it, and a relay may fake a failure the
      // server never proved. Only a failure we proved ourselves (AuthError) is final.
      try {
        auto connection = std::make_unique<Connection>(std::move(stream), options);
        connection->handshake_as_client(secret);
        return connection;
      } catch (const AuthError&) {
        throw;
      } catch (const TransportError& handshake_error) {
        error = fmt::format("the handshake failed: {}", handshake_error.what());
      }
    }
    wait.failed(std::move(error));
    if (!wait.pause()) wait.give_up();
  }
}

}  // namespace dtrain
