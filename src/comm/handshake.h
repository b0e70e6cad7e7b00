// The handshake of comm/auth.h, both sides, over a Connection's handshake frames: which frames are
// exchanged in which order and what each side checks. The client's side blocks; the server's goes
// a step at a time, so that one thread can drive every connection still authenticating
// (comm/server.h). Framing, and what a failure does to the connection, are Connection's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "comm/auth.h"
#include "comm/connection_options.h"

namespace dtrain {

class Connection;

// What a handshake that succeeded leaves: what the peer said of itself, proved with the secret,
// and, where frames are authenticated, the two frame keys.
struct HandshakeResult {
  HandshakeParams peer;
  FrameKeys keys;
};

// The client's side, to the end. Throws AuthError if the server fails the handshake or rejects
// us, TransportError / FrameError otherwise (Connection::handshake_as_client's contract).
// REQUIRES: called by Connection, which is kHandshaking.
class ClientHandshake {
 public:
  static HandshakeResult run(Connection& connection, std::string_view secret);
};

// The server's side, one step at a time. Each advance() makes the progress the socket allows now
// and returns true once the client is admitted (then result() holds what it proved); throws as
// Connection::handshake_as_server. REQUIRES: the same secret and admit at every call.
class ServerHandshake {
 public:
  explicit ServerHandshake(Connection& connection) : connection_(connection) {}
  ServerHandshake(const ServerHandshake&) = delete;
  ServerHandshake& operator=(const ServerHandshake&) = delete;

  bool advance(std::string_view secret, const Admission& admit);
  const HandshakeResult& result() const { return result_; }

 private:
  enum class Stage { kHello, kChallenge, kProof, kAnswer };

  // Reads the client's HELLO and starts sending our CHALLENGE.
  void challenge(std::span<const std::byte> hello, std::string_view secret);
  // Checks the client's PROOF and starts sending our answer: AUTH_OK, REFUSED or AUTH_FAILED.
  void judge(std::span<const std::byte> proof, std::string_view secret, const Admission& admit);
  // Starts sending the last handshake frame; `failure`, if any, is thrown once it is out.
  void answer(uint16_t type, std::span<const std::byte> meta, std::optional<AuthError> failure);

  Connection& connection_;
  Stage stage_ = Stage::kHello;
  Nonce client_nonce_{};
  Nonce server_nonce_{};
  std::vector<std::byte> client_params_;
  std::vector<std::byte> server_params_;
  std::vector<std::byte> outgoing_;   // the meta of the frame being sent, which refers to it
  std::optional<AuthError> failure_;  // told to the client; thrown once that is out
  HandshakeResult result_;            // the client's params as soon as its HELLO is in
};

}  // namespace dtrain
