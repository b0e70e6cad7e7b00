// HMAC-SHA256 proofs, HKDF-SHA256 frame keys and nonces through OpenSSL.
#include "comm/auth.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>

#include <climits>
#include <cstring>
#include <stdexcept>
#include <string>

#include "base/error.h"
#include "comm/frame_format.h"

namespace dtrain {

namespace {

constexpr std::string_view kServerLabel = "dtrain-server";
constexpr std::string_view kClientLabel = "dtrain-client";
constexpr std::string_view kProcessLabel = "dtrain-process";
constexpr std::string_view kClientToServerLabel = "dtrain frames client to server";
constexpr std::string_view kServerToClientLabel = "dtrain frames server to client";

std::string openssl_error() {
  char text[256] = "unknown OpenSSL error";
  if (unsigned long code = ERR_get_error(); code != 0) ERR_error_string_n(code, text, sizeof text);
  return text;
}

void append(std::vector<unsigned char>& out, std::span<const std::byte> bytes) {
  const auto* at = reinterpret_cast<const unsigned char*>(bytes.data());
  out.insert(out.end(), at, at + bytes.size());
}

void append(std::vector<unsigned char>& out, std::string_view text) {
  out.insert(out.end(), text.begin(), text.end());
}

// Both sides' params, each behind its u16 length, so that no two pairs encode alike.
void append_binding(std::vector<unsigned char>& out, std::span<const std::byte> client_params,
                    std::span<const std::byte> server_params) {
  for (auto params : {client_params, server_params}) {
    out.push_back(static_cast<unsigned char>(params.size() & 0xFF));
    out.push_back(static_cast<unsigned char>(params.size() >> 8));
    append(out, params);
  }
}

// HMAC-SHA256(secret, label | first | second | binding).
Proof hmac(std::string_view secret, std::string_view label, const Nonce& first, const Nonce& second,
           std::span<const std::byte> client_params, std::span<const std::byte> server_params) {
  std::vector<unsigned char> message;
  append(message, label);
  append(message, first);
  append(message, second);
  append_binding(message, client_params, server_params);

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

// HKDF-SHA256 (RFC 5869) of the secret, salted with both nonces, for one direction's key.
FrameKey hkdf(std::string_view secret, const Nonce& client_nonce, const Nonce& server_nonce,
              std::string_view label, std::span<const std::byte> client_params,
              std::span<const std::byte> server_params) {
  std::vector<unsigned char> salt;
  append(salt, client_nonce);
  append(salt, server_nonce);
  std::vector<unsigned char> info;
  append(info, label);
  append_binding(info, client_params, server_params);

  EVP_KDF* kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
  EVP_KDF_CTX* ctx = kdf != nullptr ? EVP_KDF_CTX_new(kdf) : nullptr;
  EVP_KDF_free(kdf);
  if (ctx == nullptr) throw Error("HKDF is not available: " + openssl_error());
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, const_cast<char*>(secret.data()),
                                        secret.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, salt.data(), salt.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info.data(), info.size()),
      OSSL_PARAM_construct_end()};
  FrameKey key;
  const int ok =
      EVP_KDF_derive(ctx, reinterpret_cast<unsigned char*>(key.data()), key.size(), params);
  EVP_KDF_CTX_free(ctx);
  if (ok != 1) throw Error("HKDF-SHA256 failed: " + openssl_error());
  return key;
}

}  // namespace

std::vector<std::byte> encode_params(const HandshakeParams& params) {
  if (params.identity.size() > kMaxIdentityBytes) {
    throw std::invalid_argument("handshake identity \"" + params.identity + "\" is too long");
  }
  constexpr size_t kIdentityAt = 1 + kProcessKeyBytes + 1;
  std::vector<std::byte> out(kIdentityAt + params.identity.size());
  out[0] = std::byte{params.authenticate_frames ? uint8_t{1} : uint8_t{0}};
  std::memcpy(&out[1], params.process_key.data(), kProcessKeyBytes);
  out[kIdentityAt - 1] = static_cast<std::byte>(params.identity.size());
  if (!params.identity.empty())
    std::memcpy(&out[kIdentityAt], params.identity.data(), params.identity.size());
  return out;
}

HandshakeParams decode_params(std::span<const std::byte> encoded) {
  constexpr size_t kIdentityAt = 1 + kProcessKeyBytes + 1;
  if (encoded.size() < kIdentityAt) {
    throw AuthError("handshake parameters of " + std::to_string(encoded.size()) +
                    " bytes are too short");
  }
  const auto flags = static_cast<uint8_t>(encoded[0]);
  if (flags > 1) throw AuthError("handshake parameters carry unknown flags");
  HandshakeParams params;
  params.authenticate_frames = flags == 1;
  std::memcpy(params.process_key.data(), &encoded[1], kProcessKeyBytes);
  const auto identity_len = static_cast<size_t>(encoded[kIdentityAt - 1]);
  if (identity_len > kMaxIdentityBytes || encoded.size() != kIdentityAt + identity_len) {
    throw AuthError("handshake parameters carry a malformed identity");
  }
  for (std::byte b : encoded.subspan(kIdentityAt)) {
    const auto c = static_cast<unsigned char>(b);
    if (c < 0x20 || c > 0x7E) throw AuthError("handshake identity is not printable ASCII");
    params.identity += static_cast<char>(c);
  }
  return params;
}

std::vector<std::byte> process_transcript(const Nonce& server_nonce, const Nonce& client_nonce,
                                          std::span<const std::byte> client_params,
                                          std::span<const std::byte> server_params) {
  std::vector<unsigned char> message;
  message.reserve(kProcessLabel.size() + 2 * kNonceBytes + 4 + client_params.size() +
                  server_params.size());
  append(message, kProcessLabel);
  append(message, server_nonce);
  append(message, client_nonce);
  append_binding(message, client_params, server_params);
  const auto bytes = std::as_bytes(std::span(message));
  return {bytes.begin(), bytes.end()};
}

Nonce random_nonce() {
  Nonce nonce;
  if (RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), kNonceBytes) != 1) {
    throw Error("could not draw a random nonce: " + openssl_error());
  }
  return nonce;
}

Proof server_proof(std::string_view secret, const Nonce& client_nonce, const Nonce& server_nonce,
                   std::span<const std::byte> client_params,
                   std::span<const std::byte> server_params) {
  return hmac(secret, kServerLabel, client_nonce, server_nonce, client_params, server_params);
}

Proof client_proof(std::string_view secret, const Nonce& server_nonce, const Nonce& client_nonce,
                   std::span<const std::byte> client_params,
                   std::span<const std::byte> server_params) {
  return hmac(secret, kClientLabel, server_nonce, client_nonce, client_params, server_params);
}

bool proofs_equal(const Proof& a, const Proof& b) {
  return CRYPTO_memcmp(a.data(), b.data(), kProofBytes) == 0;
}

FrameKeys frame_keys(std::string_view secret, const Nonce& client_nonce, const Nonce& server_nonce,
                     std::span<const std::byte> client_params,
                     std::span<const std::byte> server_params) {
  return {
      hkdf(secret, client_nonce, server_nonce, kClientToServerLabel, client_params, server_params),
      hkdf(secret, client_nonce, server_nonce, kServerToClientLabel, client_params, server_params)};
}

}  // namespace dtrain
