// GMAC through Intel's Multi-Buffer Crypto library (Debian libipsec-mb-dev, x86-64 only): its
// AVX-512 kernels (VAES, VPCLMULQDQ) hash four blocks per instruction, 2.5 times OpenSSL 3.0's
// GHASH on this machine's cores (42.7 against 17.0 GB/s over 512 KiB). The tags are the standard
// GMAC's, the same as OpenSSL's for the same key, nonce and bytes; tests check one against the
// other. Built only where the library is found (DTRAIN_HAVE_IPSEC_MB); comm/frame_mac.h chooses.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <span>

#include "comm/frame_mac.h"

namespace dtrain {

inline constexpr size_t kGmacNonceBytes = 12;

// Not thread-safe; one per FrameMac.
class IpsecGmac {
 public:
  explicit IpsecGmac(const FrameKey& key);
  ~IpsecGmac();
  IpsecGmac(const IpsecGmac&) = delete;
  IpsecGmac& operator=(const IpsecGmac&) = delete;

  void begin(const std::array<unsigned char, kGmacNonceBytes>& nonce);
  // Any length, any split.
  void update(std::span<const std::byte> bytes);
  FrameTag tag();

  // The instruction set the library chose for this CPU, e.g. "AVX-512".
  static const char* kernels();

 private:
  struct State;  // the expanded key and the running hash, aligned as the library needs
  std::unique_ptr<State> state_;
};

}  // namespace dtrain
