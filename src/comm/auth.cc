// HMAC-SHA256 proofs and nonces through OpenSSL.
#include "comm/auth.h"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <climits>
#include <cstring>
#include <string>

#include "base/error.h"

namespace dtrain {

namespace {

constexpr std::string_view kServerLabel = "dtrain-server";
constexpr std::string_view kClientLabel = "dtrain-client";

std::string openssl_error() {
  char text[256] = "unknown OpenSSL error";
  if (unsigned long code = ERR_get_error(); code != 0) ERR_error_string_n(code, text, sizeof text);
  return text;
}

// HMAC-SHA256(secret, label | first | second).
Proof hmac(std::string_view secret, std::string_view label, const Nonce& first,
           const Nonce& second) {
  std::array<unsigned char, kServerLabel.size() + 2 * kNonceBytes> message;
  static_assert(kClientLabel.size() == kServerLabel.size());
  unsigned char* at = message.data();
  std::memcpy(at, label.data(), label.size());
  at += label.size();
  std::memcpy(at, first.data(), kNonceBytes);
  at += kNonceBytes;
  std::memcpy(at, second.data(), kNonceBytes);

  if (secret.size() > INT_MAX) throw Error("cluster secret is longer than 2 GiB");
  Proof proof;
  unsigned int proof_len = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), message.data(),
           message.size(), reinterpret_cast<unsigned char*>(proof.data()), &proof_len) == nullptr ||
      proof_len != kProofBytes) {
    throw Error("HMAC-SHA256 failed: " + openssl_error());
  }
  return proof;
}

}  // namespace

Nonce random_nonce() {
  Nonce nonce;
  if (RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), kNonceBytes) != 1) {
    throw Error("could not draw a random nonce: " + openssl_error());
  }
  return nonce;
}

Proof server_proof(std::string_view secret, const Nonce& client_nonce, const Nonce& server_nonce) {
  return hmac(secret, kServerLabel, client_nonce, server_nonce);
}

Proof client_proof(std::string_view secret, const Nonce& server_nonce, const Nonce& client_nonce) {
  return hmac(secret, kClientLabel, server_nonce, client_nonce);
}

bool proofs_equal(const Proof& a, const Proof& b) {
  return CRYPTO_memcmp(a.data(), b.data(), kProofBytes) == 0;
}

}  // namespace dtrain
