// Which process a connection comes from, proved rather than claimed: each process draws an
// Ed25519 key pair once; its public key is what it says of itself in every handshake (comm/auth.h:
// HandshakeParams::process_key), and the client signs the handshake's transcript with the private
// key. Another process, even one holding the cluster secret, can copy the public key it sees on
// the wire but cannot sign with it, so it cannot pass for a live connection's process (a server
// lets a second connection of one identity in only from the same process: comm/server.h).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

struct evp_pkey_st;

namespace dtrain {

inline constexpr size_t kProcessKeyBytes = 32;  // an Ed25519 public key
inline constexpr size_t kProcessSignatureBytes = 64;
using ProcessPublicKey = std::array<std::byte, kProcessKeyBytes>;
using ProcessSignature = std::array<std::byte, kProcessSignatureBytes>;

class ProcessKey {
 public:
  // This process's key, drawn on first use. Thread-safe. Throws dtrain::Error if OpenSSL fails.
  static const ProcessKey& own();
  // A key derived from `seed`, for tests that play several processes in one.
  static ProcessKey from_seed(uint64_t seed);

  ProcessKey(ProcessKey&& other) noexcept;
  ProcessKey& operator=(ProcessKey&&) = delete;
  ProcessKey(const ProcessKey&) = delete;
  ProcessKey& operator=(const ProcessKey&) = delete;
  ~ProcessKey();

  const ProcessPublicKey& public_key() const { return public_key_; }
  // Ed25519 over `message`. Thread-safe.
  ProcessSignature sign(std::span<const std::byte> message) const;

 private:
  explicit ProcessKey(evp_pkey_st* key);

  evp_pkey_st* key_ = nullptr;
  ProcessPublicKey public_key_{};
};

// Whether `signature` is the holder of `key`'s over `message`. Thread-safe.
bool verify_process_signature(const ProcessPublicKey& key, std::span<const std::byte> message,
                              const ProcessSignature& signature);

// The public key's first 8 bytes: a short name for the process, in logs and comparisons.
uint64_t incarnation_of(const ProcessPublicKey& key);

}  // namespace dtrain
