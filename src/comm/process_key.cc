// Ed25519 through OpenSSL's EVP interface (one-shot EVP_DigestSign: Ed25519 hashes internally).
#include "comm/process_key.h"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include <string>
#include <utility>

#include "base/error.h"
#include "comm/frame_format.h"

namespace dtrain {

namespace {

[[noreturn]] void openssl_failed(const char* what) {
  char text[256] = "unknown OpenSSL error";
  if (unsigned long code = ERR_get_error(); code != 0) ERR_error_string_n(code, text, sizeof text);
  throw Error(std::string("process key: ") + what + " failed: " + text);
}

}  // namespace

ProcessKey::ProcessKey(evp_pkey_st* key) : key_(key) {
  size_t length = public_key_.size();
  if (EVP_PKEY_get_raw_public_key(key_, reinterpret_cast<unsigned char*>(public_key_.data()),
                                  &length) != 1 ||
      length != public_key_.size()) {
    EVP_PKEY_free(key_);
    openssl_failed("reading the Ed25519 public key");
  }
}

ProcessKey::ProcessKey(ProcessKey&& other) noexcept
    : key_(std::exchange(other.key_, nullptr)), public_key_(other.public_key_) {}

ProcessKey::~ProcessKey() { EVP_PKEY_free(key_); }

const ProcessKey& ProcessKey::own() {
  static const ProcessKey key = [] {
    EVP_PKEY* drawn = EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519");
    if (drawn == nullptr) openssl_failed("drawing an Ed25519 key");
    return ProcessKey(drawn);
  }();
  return key;
}

ProcessKey ProcessKey::from_seed(uint64_t seed) {
  std::array<unsigned char, 8> seed_bytes{};
  frame_format::store_le(std::as_writable_bytes(std::span(seed_bytes)), seed);
  std::array<unsigned char, SHA256_DIGEST_LENGTH> private_key{};
  SHA256(seed_bytes.data(), seed_bytes.size(), private_key.data());
  EVP_PKEY* key = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, private_key.data(),
                                               private_key.size());
  if (key == nullptr) openssl_failed("deriving an Ed25519 key");
  return ProcessKey(key);
}

ProcessSignature ProcessKey::sign(std::span<const std::byte> message) const {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ProcessSignature signature{};
  size_t length = signature.size();
  const bool ok =
      ctx != nullptr && EVP_DigestSignInit(ctx, nullptr, nullptr, nullptr, key_) == 1 &&
      EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(signature.data()), &length,
                     reinterpret_cast<const unsigned char*>(message.data()), message.size()) == 1 &&
      length == signature.size();
  EVP_MD_CTX_free(ctx);
  if (!ok) openssl_failed("Ed25519 signing");
  return signature;
}

bool verify_process_signature(const ProcessPublicKey& key, std::span<const std::byte> message,
                              const ProcessSignature& signature) {
  EVP_PKEY* public_key = EVP_PKEY_new_raw_public_key(
      EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(key.data()), key.size());
  if (public_key == nullptr) return false;  // not a point on the curve: nothing it could sign
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  const bool ok =
      ctx != nullptr && EVP_DigestVerifyInit(ctx, nullptr, nullptr, nullptr, public_key) == 1 &&
      EVP_DigestVerify(ctx, reinterpret_cast<const unsigned char*>(signature.data()),
                       signature.size(), reinterpret_cast<const unsigned char*>(message.data()),
                       message.size()) == 1;
  EVP_MD_CTX_free(ctx);
  EVP_PKEY_free(public_key);
  ERR_clear_error();  // a failed verification leaves its reason queued; it is not an error here
  return ok;
}

uint64_t incarnation_of(const ProcessPublicKey& key) {
  return frame_format::load_le<uint64_t>(key);
}

}  // namespace dtrain
