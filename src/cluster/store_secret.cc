// X25519 through OpenSSL's EVP interface; each rank's box key is SHA-256 over the shared point and
// both public keys, used for one AES-256-GCM seal only, so a fixed nonce is safe.
#include "cluster/store_secret.h"

#include <fmt/format.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include <array>
#include <memory>
#include <optional>
#include <string_view>

#include "base/error.h"
#include "cluster/cluster_secret.h"

namespace dtrain {
namespace {

constexpr size_t kKeyBytes = 32;  // an X25519 public key, and the AES-256 key
constexpr size_t kTagBytes = 16;
constexpr std::string_view kDomain = "dtrain: the cluster secret sealed for one rank, v1";

using Key = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using BoxKey = std::array<unsigned char, kKeyBytes>;

std::string openssl_error() {
  char text[256] = "unknown OpenSSL error";
  if (const unsigned long code = ERR_get_error(); code != 0)
    ERR_error_string_n(code, text, sizeof text);
  return text;
}

Key own_key() {
  Key key(EVP_PKEY_Q_keygen(nullptr, nullptr, "X25519"), &EVP_PKEY_free);
  if (!key) throw Error("drawing an X25519 key failed: " + openssl_error());
  return key;
}

std::string public_of(EVP_PKEY* key) {
  std::string bytes(kKeyBytes, '\0');
  size_t length = bytes.size();
  if (EVP_PKEY_get_raw_public_key(key, reinterpret_cast<unsigned char*>(bytes.data()), &length) !=
          1 ||
      length != kKeyBytes) {
    throw Error("reading an X25519 public key failed: " + openssl_error());
  }
  return bytes;
}

// The box key between `own` and the public key `peer` that the store holds under `peer_key`;
// nullopt where that value is no key one can agree with (a wrong size, a point of small order).
std::optional<BoxKey> box_key(EVP_PKEY* own, const std::string& peer, const std::string& rank_0,
                              const std::string& rank_r, int rank) {
  if (peer.size() != kKeyBytes) return std::nullopt;
  const Key peer_key(
      EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nullptr,
                                  reinterpret_cast<const unsigned char*>(peer.data()), peer.size()),
      &EVP_PKEY_free);
  std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> ctx(EVP_PKEY_CTX_new(own, nullptr),
                                                                  &EVP_PKEY_CTX_free);
  std::array<unsigned char, kKeyBytes> shared{};
  size_t length = shared.size();
  const bool agreed = peer_key && ctx && EVP_PKEY_derive_init(ctx.get()) == 1 &&
                      EVP_PKEY_derive_set_peer(ctx.get(), peer_key.get()) == 1 &&
                      EVP_PKEY_derive(ctx.get(), shared.data(), &length) == 1 &&
                      length == shared.size();
  ERR_clear_error();  // a refused point leaves its reason queued; it is an outcome here
  if (!agreed) return std::nullopt;
  // Bound to both public keys and the rank, so a box is for one pair and one place only.
  const std::string transcript = fmt::format("{}|{}|", kDomain, rank) + rank_0 + rank_r;
  std::string input(reinterpret_cast<const char*>(shared.data()), shared.size());
  input += transcript;
  BoxKey key{};
  SHA256(reinterpret_cast<const unsigned char*>(input.data()), input.size(), key.data());
  return key;
}

using Cipher = std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)>;

std::string seal(const BoxKey& key, const std::string& secret) {
  const std::array<unsigned char, 12> nonce{};
  Cipher ctx(EVP_CIPHER_CTX_new(), &EVP_CIPHER_CTX_free);
  std::string box(secret.size() + kTagBytes, '\0');
  auto* out = reinterpret_cast<unsigned char*>(box.data());
  int length = 0, final_length = 0;
  const bool ok =
      ctx &&
      EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key.data(), nonce.data()) == 1 &&
      EVP_EncryptUpdate(ctx.get(), out, &length,
                        reinterpret_cast<const unsigned char*>(secret.data()),
                        static_cast<int>(secret.size())) == 1 &&
      EVP_EncryptFinal_ex(ctx.get(), out + length, &final_length) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTagBytes, out + secret.size()) == 1;
  if (!ok) throw Error("sealing the cluster secret failed: " + openssl_error());
  return box;
}

// The secret in `box`, or nullopt where it does not open with key (not sealed for it, or altered).
std::optional<std::string> open_box(const BoxKey& key, const std::string& box) {
  if (box.size() < kTagBytes) return std::nullopt;
  const std::array<unsigned char, 12> nonce{};
  const size_t secret_bytes = box.size() - kTagBytes;
  std::string tag = box.substr(secret_bytes);
  Cipher ctx(EVP_CIPHER_CTX_new(), &EVP_CIPHER_CTX_free);
  std::string secret(secret_bytes, '\0');
  auto* out = reinterpret_cast<unsigned char*>(secret.data());
  int length = 0, final_length = 0;
  const bool ok =
      ctx &&
      EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key.data(), nonce.data()) == 1 &&
      EVP_DecryptUpdate(ctx.get(), out, &length, reinterpret_cast<const unsigned char*>(box.data()),
                        static_cast<int>(secret_bytes)) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTagBytes, tag.data()) == 1 &&
      EVP_DecryptFinal_ex(ctx.get(), out + length, &final_length) == 1;
  ERR_clear_error();
  if (!ok) return std::nullopt;
  return secret;
}

[[noreturn]] void refuse(const std::string& key, const char* what) {
  throw AuthError(fmt::format(
      "the store's {} {}: another process wrote to the store during the rendezvous, or the ranks "
      "are of different runs; give every rank the same DTRAIN_SECRET to need nothing from the "
      "store",
      key, what));
}

}  // namespace

std::string store_key_key(int rank) { return fmt::format("dtrain/key/{}", rank); }

std::string store_sealed_key(int rank) { return fmt::format("dtrain/sealed/{}", rank); }

std::string agree_secret_through_store(SharedStore& store, int rank, int world_size) {
  const Key own = own_key();
  const std::string mine = public_of(own.get());
  store.set(store_key_key(rank), mine);
  if (rank != 0) {
    const std::string rank_0 = store.get(store_key_key(0));
    const std::optional<BoxKey> key = box_key(own.get(), rank_0, rank_0, mine, rank);
    if (!key) refuse(store_key_key(0), "is no X25519 public key");
    const std::string sealed_key = store_sealed_key(rank);
    std::optional<std::string> secret = open_box(*key, store.get(sealed_key));
    if (!secret) refuse(sealed_key, "does not open with this rank's key");
    return *secret;
  }
  const std::string secret = new_cluster_secret();
  for (int r = 1; r < world_size; ++r) {
    const std::string theirs = store.get(store_key_key(r));
    const std::optional<BoxKey> key = box_key(own.get(), theirs, mine, theirs, r);
    if (!key) refuse(store_key_key(r), "is no X25519 public key");
    store.set(store_sealed_key(r), seal(*key, secret));
  }
  return secret;
}

}  // namespace dtrain
