// Who may talk to a dtrain task: an HMAC-SHA256 mutual challenge-response keyed by the cluster
// secret, run at the start of every connection (comm/connection.h runs the exchange):
//
//   client -> HELLO     nonce_c
//   server -> CHALLENGE nonce_s, server_proof = HMAC(secret, "dtrain-server" | nonce_c | nonce_s)
//   client    checks server_proof; on a mismatch sends AUTH_FAILED and hangs up, proving nothing
//   client -> PROOF     client_proof = HMAC(secret, "dtrain-client" | nonce_s | nonce_c)
//   server    checks client_proof; on a mismatch sends AUTH_FAILED and hangs up
//   server -> AUTH_OK
//
// Fresh 32-byte nonces from both sides defeat replay; the distinct labels stop a proof from one
// direction being reflected as the other. The secret never crosses the wire. This authenticates
// the peers; it does not encrypt or sign the frames that follow (no TLS: trusted network).
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

namespace dtrain {

inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kProofBytes = 32;  // an HMAC-SHA256
using Nonce = std::array<std::byte, kNonceBytes>;
using Proof = std::array<std::byte, kProofBytes>;

// A fresh nonce from OpenSSL's CSPRNG. Throws dtrain::Error if the CSPRNG fails. Thread-safe.
Nonce random_nonce();

// The proofs above. `secret` is the cluster secret's raw bytes. Pure and thread-safe.
Proof server_proof(std::string_view secret, const Nonce& client_nonce, const Nonce& server_nonce);
Proof client_proof(std::string_view secret, const Nonce& server_nonce, const Nonce& client_nonce);

// Compares in time independent of where they differ (CRYPTO_memcmp), so a forger cannot find the
// right proof byte by byte from response times.
bool proofs_equal(const Proof& a, const Proof& b);

}  // namespace dtrain
