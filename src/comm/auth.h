// Who may talk to a dtrain task: an HMAC-SHA256 mutual challenge-response keyed by the cluster
// secret, run at the start of every connection (comm/handshake.h runs the exchange):
//
//   client -> HELLO     nonce_c | params_c
//   server -> CHALLENGE nonce_s | server_proof | params_s
//             server_proof = HMAC(secret, "dtrain-server" | nonce_c | nonce_s | binding)
//   client    checks server_proof; on a mismatch sends AUTH_FAILED and hangs up, proving nothing
//   client -> PROOF     client_proof = HMAC(secret, "dtrain-client" | nonce_s | nonce_c | binding)
//                       | process_signature = Ed25519(client's process key, "dtrain-process" |
//                         nonce_s | nonce_c | binding)
//   server    checks client_proof, then process_signature against the process key in params_c;
//             on a mismatch sends AUTH_FAILED and hangs up
//   server -> AUTH_OK
//
// params (HandshakeParams) say who each side is and whether frames are authenticated; binding is
// both sides' params, length-prefixed, so neither can be altered in transit without a proof
// failing. Fresh 32-byte nonces from both sides defeat replay; the distinct labels stop a proof
// from one direction being reflected as the other. The secret never crosses the wire. The process
// signature (comm/process_key.h) proves which process the client is: that one the secret cannot.
// The server's process key is said, not proved; nothing relies on it.
//
// After AUTH_OK each direction has its own frame key, HKDF-SHA256 of the secret salted with both
// nonces and bound to the params (frame_keys), with which every later frame is tagged
// (comm/frame_mac.h). Nothing is encrypted.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "comm/frame_mac.h"
#include "comm/process_key.h"

namespace dtrain {

inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kProofBytes = 32;  // an HMAC-SHA256
using Nonce = std::array<std::byte, kNonceBytes>;
using Proof = std::array<std::byte, kProofBytes>;

// What each side says of itself. Encoded: flags u8 (bit 0: frames authenticated) | process key
// (32 bytes) | identity length u8 | identity.
struct HandshakeParams {
  bool authenticate_frames = true;
  // The public half of the process's key (ProcessKey::own): tells a reconnection of the same
  // process from another process claiming the same identity. A client proves it holds it.
  ProcessPublicKey process_key{};
  // The task this side is, e.g. "worker 1" or "ps 0"; empty for a tool.
  std::string identity;

  uint64_t incarnation() const { return incarnation_of(process_key); }
};
inline constexpr size_t kMaxIdentityBytes = 64;
inline constexpr size_t kMaxParamsBytes = 1 + kProcessKeyBytes + 1 + kMaxIdentityBytes;

// REQUIRES: identity.size() <= kMaxIdentityBytes.
std::vector<std::byte> encode_params(const HandshakeParams& params);
// Throws AuthError naming what is malformed.
HandshakeParams decode_params(std::span<const std::byte> encoded);

// A fresh nonce from OpenSSL's CSPRNG. Throws dtrain::Error if the CSPRNG fails. Thread-safe.
Nonce random_nonce();

// The proofs above. `secret` is the cluster secret's raw bytes; the params are as encoded on the
// wire. Pure and thread-safe.
Proof server_proof(std::string_view secret, const Nonce& client_nonce, const Nonce& server_nonce,
                   std::span<const std::byte> client_params,
                   std::span<const std::byte> server_params);
Proof client_proof(std::string_view secret, const Nonce& server_nonce, const Nonce& client_nonce,
                   std::span<const std::byte> client_params,
                   std::span<const std::byte> server_params);

// What the client's process key signs: "dtrain-process" | nonce_s | nonce_c | binding. Pure.
std::vector<std::byte> process_transcript(const Nonce& server_nonce, const Nonce& client_nonce,
                                          std::span<const std::byte> client_params,
                                          std::span<const std::byte> server_params);

// Compares in time independent of where they differ (CRYPTO_memcmp), so a forger cannot find the
// right proof byte by byte from response times.
bool proofs_equal(const Proof& a, const Proof& b);

// The two frame keys of a connection, one per direction. Pure and thread-safe.
struct FrameKeys {
  FrameKey client_to_server;
  FrameKey server_to_client;
};
FrameKeys frame_keys(std::string_view secret, const Nonce& client_nonce, const Nonce& server_nonce,
                     std::span<const std::byte> client_params,
                     std::span<const std::byte> server_params);

}  // namespace dtrain
