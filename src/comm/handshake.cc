// The handshake's frames and checks, both sides (the protocol is in comm/auth.h), and Connection's
// entry points to it, which the client's side follows with the link step (comm/link_setup.h).
#include "comm/handshake.h"

#include <fmt/format.h>

#include <cstring>
#include <string>

#include "base/error.h"
#include "base/peer_text.h"
#include "comm/connection.h"
#include "comm/frame_format.h"
#include "comm/link_setup.h"
#include "comm/transport_counters.h"

namespace dtrain {

namespace ff = frame_format;

namespace {

std::span<const std::byte> bytes_of(const std::vector<std::byte>& v) { return v; }

HandshakeParams own_params(const ConnectionOptions& options, const ProcessKey& key) {
  return {.authenticate_frames = options.authenticate_frames,
          .process_key = key.public_key(),
          .identity = options.identity};
}

// A peer whose setting for frame authentication differs from ours: what to tell the user.
std::string mismatched_frames_error(const std::string& peer, const ConnectionOptions& options,
                                    const HandshakeParams& peer_said) {
  return fmt::format(
      "{} {} its frames and this task {}: start every task of the cluster with "
      "--unauthenticated_frames, or none",
      peer, peer_said.authenticate_frames ? "authenticates" : "does not authenticate",
      options.authenticate_frames ? "does" : "does not");
}

// A handshake frame of type `type` carrying min_meta..max_meta bytes of meta: its meta. Throws
// otherwise, saying what the peer sent instead.
std::span<const std::byte> check_handshake_frame(const Connection::Incoming& in,
                                                 const std::string& peer, uint16_t type,
                                                 size_t min_meta, size_t max_meta) {
  const bool we_are_the_client = type == ff::kTypeChallenge || type == ff::kTypeAuthOk;
  if (in.type == ff::kTypeAuthFailed && !we_are_the_client) {
    throw AuthError(fmt::format(
        "{} failed authentication (wrong cluster secret): it rejected our proof", peer));
  }
  if (in.type == ff::kTypeAuthFailed) {
    // Nothing binds this frame to the peer's secret, so a relay could have sent it: a failure
    // the peer has not proved is transient (connect() tries again), not final as our own check
    // of its proof is. A real peer says it only to a client whose secret differs, and that client
    // has found out itself before.
    throw TransportError(fmt::format(
        "{} said that authentication failed, which it did not prove (another cluster secret, or a "
        "relay on the way)",
        peer));
  }
  if (in.type == ff::kTypeRefused && type == ff::kTypeAuthOk) {
    throw AuthError(fmt::format("{} refused this connection: {}", peer, peer_text(in.meta)));
  }
  if (in.type != type || in.meta.size() < min_meta || in.meta.size() > max_meta ||
      in.tensor_bytes != 0) {
    throw AuthError(fmt::format(
        "{} broke the handshake: expected frame type {} with {}..{} meta bytes, got type {} with "
        "{} meta and {} tensor bytes",
        peer, type, min_meta, max_meta, in.type, in.meta.size(), in.tensor_bytes));
  }
  return in.meta;
}

}  // namespace

// ---- the client's side ----

HandshakeResult ClientHandshake::run(Connection& c, std::string_view secret) {
  const ConnectionOptions& options = c.options_;
  const IoDeadline deadline{
      .until = SteadyClock::now() + std::chrono::milliseconds(options.handshake_timeout_ms),
      .stall_ms = options.io_timeout_ms};
  // A courtesy so that the server can log the real reason; if it cannot be delivered, the
  // AuthError this precedes is still the error to report.
  const auto send_auth_failed_quietly = [&] {
    try {
      c.send_handshake_frame(ff::kTypeAuthFailed, {}, deadline);
    } catch (const TransportError&) {
    }
  };
  const auto expect = [&](uint16_t type, size_t min_meta, size_t max_meta) {
    return check_handshake_frame(c.receive_handshake_frame(deadline), c.peer(), type, min_meta,
                                 max_meta);
  };

  const Nonce client_nonce = random_nonce();
  const std::vector<std::byte> client_params = encode_params(own_params(options, c.process_key()));
  std::vector<std::byte> hello(client_nonce.begin(), client_nonce.end());
  hello.insert(hello.end(), client_params.begin(), client_params.end());
  c.send_handshake_frame(ff::kTypeHello, hello, deadline);

  const auto challenge = expect(ff::kTypeChallenge, kNonceBytes + kProofBytes,
                                kNonceBytes + kProofBytes + kMaxParamsBytes);
  Nonce server_nonce;
  Proof their_proof;
  std::memcpy(server_nonce.data(), challenge.data(), kNonceBytes);
  std::memcpy(their_proof.data(), challenge.data() + kNonceBytes, kProofBytes);
  const auto server_params = challenge.subspan(kNonceBytes + kProofBytes);
  // The server proves itself first: we prove nothing to a peer that does not hold the secret.
  if (!proofs_equal(their_proof, server_proof(secret, client_nonce, server_nonce,
                                              bytes_of(client_params), server_params))) {
    send_auth_failed_quietly();
    throw AuthError(fmt::format(
        "{} failed authentication (wrong cluster secret): its proof does not match our secret",
        c.peer()));
  }
  HandshakeResult result;
  result.peer = decode_params(server_params);
  if (result.peer.authenticate_frames != options.authenticate_frames) {
    send_auth_failed_quietly();
    throw AuthError(mismatched_frames_error(c.peer(), options, result.peer));
  }
  // The proof of the secret, then of which process this is.
  const Proof proof =
      client_proof(secret, server_nonce, client_nonce, bytes_of(client_params), server_params);
  const ProcessSignature signature = c.process_key().sign(
      process_transcript(server_nonce, client_nonce, bytes_of(client_params), server_params));
  std::vector<std::byte> proof_meta(proof.begin(), proof.end());
  proof_meta.insert(proof_meta.end(), signature.begin(), signature.end());
  c.send_handshake_frame(ff::kTypeProof, proof_meta, deadline);
  expect(ff::kTypeAuthOk, 0, 0);
  if (options.authenticate_frames) {
    result.keys =
        frame_keys(secret, client_nonce, server_nonce, bytes_of(client_params), server_params);
  }
  return result;
}

// ---- the server's side, a step at a time ----

bool ServerHandshake::advance(std::string_view secret, const Admission& admit) {
  for (;;) {
    switch (stage_) {
      case Stage::kHello: {
        const auto in = connection_.try_receive_handshake_frame();
        if (!in) return false;
        challenge(check_handshake_frame(*in, connection_.peer(), ff::kTypeHello, kNonceBytes,
                                        kNonceBytes + kMaxParamsBytes),
                  secret);
        break;
      }
      case Stage::kChallenge:
        if (!connection_.pump_send()) return false;
        stage_ = Stage::kProof;
        break;
      case Stage::kProof: {
        const auto in = connection_.try_receive_handshake_frame();
        if (!in) return false;
        // A client whose setting differs says so by refusing to go on (it checks once it knows
        // we hold the secret); the reason is ours to log too.
        const ConnectionOptions& options = connection_.options_;
        const bool mismatched = result_.peer.authenticate_frames != options.authenticate_frames;
        std::span<const std::byte> proof;
        try {
          proof = check_handshake_frame(*in, connection_.peer(), ff::kTypeProof,
                                        kProofBytes + kProcessSignatureBytes,
                                        kProofBytes + kProcessSignatureBytes);
        } catch (const AuthError&) {
          if (mismatched) {
            throw AuthError(mismatched_frames_error(connection_.peer(), options, result_.peer));
          }
          throw;
        }
        judge(proof, secret, admit);
        break;
      }
      case Stage::kAnswer:
        try {
          if (!connection_.pump_send()) return false;
        } catch (const TransportError&) {
          // Telling a failing client why is a courtesy; the failure is the error to report.
          if (failure_) throw *failure_;
          throw;
        }
        if (failure_) throw *failure_;
        return true;
    }
  }
}

void ServerHandshake::challenge(std::span<const std::byte> hello, std::string_view secret) {
  std::memcpy(client_nonce_.data(), hello.data(), kNonceBytes);
  client_params_.assign(hello.begin() + kNonceBytes, hello.end());
  result_.peer = decode_params(client_params_);
  server_nonce_ = random_nonce();
  server_params_ = encode_params(own_params(connection_.options_, connection_.process_key()));
  const Proof ours = server_proof(secret, client_nonce_, server_nonce_, bytes_of(client_params_),
                                  bytes_of(server_params_));
  outgoing_.assign(server_nonce_.begin(), server_nonce_.end());
  outgoing_.insert(outgoing_.end(), ours.begin(), ours.end());
  outgoing_.insert(outgoing_.end(), server_params_.begin(), server_params_.end());
  connection_.start_handshake_frame(ff::kTypeChallenge, outgoing_);
  stage_ = Stage::kChallenge;
}

void ServerHandshake::judge(std::span<const std::byte> proof, std::string_view secret,
                            const Admission& admit) {
  const ConnectionOptions& options = connection_.options_;
  const std::string& peer = connection_.peer();
  Proof theirs;
  std::memcpy(theirs.data(), proof.data(), kProofBytes);
  ProcessSignature signature;
  std::memcpy(signature.data(), proof.data() + kProofBytes, kProcessSignatureBytes);
  if (!proofs_equal(theirs, client_proof(secret, server_nonce_, client_nonce_,
                                         bytes_of(client_params_), bytes_of(server_params_)))) {
    answer(ff::kTypeAuthFailed, {},
           AuthError(fmt::format("{} failed authentication (wrong cluster secret): its "
                                 "proof does not match our secret",
                                 peer)));
  } else if (!verify_process_signature(
                 result_.peer.process_key,
                 process_transcript(server_nonce_, client_nonce_, bytes_of(client_params_),
                                    bytes_of(server_params_)),
                 signature)) {
    answer(ff::kTypeAuthFailed, {},
           AuthError(fmt::format("{} holds the cluster secret but did not prove it is the "
                                 "process it says it is (its process key): another process "
                                 "passing for it?",
                                 peer)));
  } else if (result_.peer.authenticate_frames != options.authenticate_frames) {
    answer(ff::kTypeAuthFailed, {},
           AuthError(mismatched_frames_error(peer, options, result_.peer)));
  } else if (const std::string reason = admit ? admit(result_.peer) : ""; !reason.empty()) {
    // Cut to what a handshake frame carries; the whole reason is in our own log.
    const std::string_view told =
        std::string_view(reason).substr(0, ff::kMaxHandshakePayloadBytes - ff::kMetaLenBytes);
    answer(ff::kTypeRefused, std::as_bytes(std::span(told)),
           AuthError(fmt::format("refused {}: {}", peer, reason)));
  } else {
    if (options.authenticate_frames) {
      result_.keys = frame_keys(secret, client_nonce_, server_nonce_, bytes_of(client_params_),
                                bytes_of(server_params_));
    }
    answer(ff::kTypeAuthOk, {}, std::nullopt);
  }
}

void ServerHandshake::answer(uint16_t type, std::span<const std::byte> meta,
                             std::optional<AuthError> failure) {
  outgoing_.assign(meta.begin(), meta.end());
  connection_.start_handshake_frame(type, outgoing_);
  failure_ = std::move(failure);
  stage_ = Stage::kAnswer;
}

// ---- Connection's entry points ----

void Connection::handshake_as_client(std::string_view secret) {
  if (secret.empty()) throw std::invalid_argument("Connection::handshake_as_client: empty secret");
  check_state(State::kHandshaking, "handshake_as_client");
  const HandshakeResult result = guarded([&] { return ClientHandshake::run(*this, secret); });
  open_after_handshake(result.peer, &result.keys.client_to_server, &result.keys.server_to_client);
  try {
    link_ = guarded([&] { return LinkSetup::run_as_client(*this); });
    link_step_ = LinkState::kDone;
  } catch (const LinkRefused&) {
    fail(std::current_exception());
  }
}

void Connection::handshake_as_server(std::string_view secret, const Admission& admit) {
  const auto until = SteadyClock::now() + std::chrono::milliseconds(options_.handshake_timeout_ms);
  while (!continue_handshake_as_server(secret, admit)) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - SteadyClock::now());
    if (left.count() <= 0) {
      fail(std::make_exception_ptr(TransportError(
          writer_.busy() ? fmt::format("timed out sending to {}", peer())
                         : fmt::format("timed out waiting for data from {}", peer()))));
    }
    wait_for(waitable(!writer_.busy(), writer_.busy()), static_cast<int>(left.count()));
  }
}

bool Connection::continue_handshake_as_server(std::string_view secret, const Admission& admit) {
  if (secret.empty()) throw std::invalid_argument("Connection::handshake_as_server: empty secret");
  check_state(State::kHandshaking, "handshake_as_server");
  if (!server_handshake_) server_handshake_ = std::make_unique<ServerHandshake>(*this);
  if (!guarded([&] { return server_handshake_->advance(secret, admit); })) return false;
  const HandshakeResult result = server_handshake_->result();
  server_handshake_.reset();
  server_side_ = true;  // answers the link step in its first receive()
  open_after_handshake(result.peer, &result.keys.server_to_client, &result.keys.client_to_server);
  return true;
}

void Connection::send_handshake_frame(uint16_t type, std::span<const std::byte> meta,
                                      const IoDeadline& deadline) {
  writer_.write(type, 0, meta, {}, deadline);
}

Connection::Incoming Connection::receive_handshake_frame(const IoDeadline& deadline) {
  return receive_frame(deadline, deadline, ff::kMaxHandshakePayloadBytes, /*handshake=*/true);
}

std::optional<Connection::Incoming> Connection::try_receive_handshake_frame() {
  return try_receive_frame(ff::kMaxHandshakePayloadBytes, /*handshake=*/true);
}

void Connection::start_handshake_frame(uint16_t type, std::span<const std::byte> meta) {
  writer_.start(type, 0, meta, {});  // no frame keys yet: a CRC
}

void Connection::open_after_handshake(const HandshakeParams& peer, const FrameKey* send_key,
                                      const FrameKey* receive_key) {
  peer_params_ = peer;
  traffic_ = &TransportCounters::process().peer(peer_label(peer.identity));
  if (options_.authenticate_frames) {
    writer_.set_key(*send_key);
    reader_.set_key(*receive_key);
  }
  std::lock_guard lock(mutex_);
  // close() from another thread may have won; closed stays closed.
  if (state_ == State::kHandshaking) state_ = State::kOpen;
}

}  // namespace dtrain
