// GMAC through ipsec-mb, or OpenSSL's EVP AES-128-GCM: the frame goes in as additional data only,
// so GHASH does the work and nothing is encrypted.
#include "comm/frame_mac.h"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>

#include <algorithm>
#include <climits>
#include <string>

#include "base/error.h"
#include "comm/frame_format.h"
#ifndef DTRAIN_HAVE_IPSEC_MB
#define DTRAIN_HAVE_IPSEC_MB 0  // builds that do not look for it: the fuzz targets
#endif
#if DTRAIN_HAVE_IPSEC_MB
#include "comm/gmac_ipsec_mb.h"
#else
namespace dtrain {
// Never made in this build (mac_engine_available says so): defined only so that FrameMac's
// unique_ptr to one can be destroyed.
class IpsecGmac {};
}  // namespace dtrain
#endif

namespace dtrain {

namespace {

constexpr size_t kIvBytes = 12;  // GCM's natural nonce: no extra GHASH pass to derive the counter

[[noreturn]] void openssl_failed(const char* what) {
  char text[256] = "unknown OpenSSL error";
  if (unsigned long code = ERR_get_error(); code != 0) ERR_error_string_n(code, text, sizeof text);
  throw Error(std::string("frame authentication: ") + what + " failed: " + text);
}

// Fetched once: an implicit fetch at every init would look the algorithm up again.
const EVP_CIPHER* aes_128_gcm() {
  static EVP_CIPHER* cipher = EVP_CIPHER_fetch(nullptr, "AES-128-GCM", nullptr);
  if (cipher == nullptr) openssl_failed("fetching AES-128-GCM");
  return cipher;
}

}  // namespace

bool mac_engine_available(MacEngine engine) {
  return engine != MacEngine::kIpsecMb || DTRAIN_HAVE_IPSEC_MB;
}

std::string mac_engine_name() {
#if DTRAIN_HAVE_IPSEC_MB
  return std::string("ipsec-mb (") + IpsecGmac::kernels() + ")";
#else
  return "OpenSSL";
#endif
}

// Out of line: the header only declares IpsecGmac.
FrameMac::~FrameMac() { EVP_CIPHER_CTX_free(ctx_); }

FrameMac::FrameMac(const FrameKey& key, MacEngine engine) {
  if (engine == MacEngine::kFastest) {
    engine = mac_engine_available(MacEngine::kIpsecMb) ? MacEngine::kIpsecMb : MacEngine::kOpenSsl;
  }
  if (engine == MacEngine::kIpsecMb) {
#if DTRAIN_HAVE_IPSEC_MB
    ipsec_ = std::make_unique<IpsecGmac>(key);
    return;
#else
    throw Error("frame authentication: this build has no ipsec-mb (Debian libipsec-mb-dev)");
#endif
  }
  ctx_ = EVP_CIPHER_CTX_new();
  if (ctx_ == nullptr) openssl_failed("EVP_CIPHER_CTX_new");
  // The key schedule once; begin() only sets the nonce.
  if (EVP_EncryptInit_ex2(ctx_, aes_128_gcm(), reinterpret_cast<const unsigned char*>(key.data()),
                          nullptr, nullptr) != 1) {
    EVP_CIPHER_CTX_free(ctx_);
    openssl_failed("setting the frame key");
  }
}

void FrameMac::begin(uint64_t frame, FramePart part) {
  // The nonce: the part (4 bytes) then the frame's number (8), never the same twice under a key.
  std::array<unsigned char, kIvBytes> iv{};
  const auto iv_bytes = std::as_writable_bytes(std::span(iv));
  frame_format::store_le(iv_bytes, static_cast<uint32_t>(part));
  frame_format::store_le(iv_bytes.subspan(4), frame);
#if DTRAIN_HAVE_IPSEC_MB
  if (ipsec_) return ipsec_->begin(iv);
#endif
  if (EVP_EncryptInit_ex2(ctx_, nullptr, nullptr, iv.data(), nullptr) != 1) {
    openssl_failed("setting the frame nonce");
  }
}

void FrameMac::update(std::span<const std::byte> bytes) {
#if DTRAIN_HAVE_IPSEC_MB
  if (ipsec_) return ipsec_->update(bytes);
#endif
  while (!bytes.empty()) {
    const size_t n = std::min<size_t>(bytes.size(), INT_MAX);
    int out_len = 0;
    if (EVP_EncryptUpdate(ctx_, nullptr, &out_len,
                          reinterpret_cast<const unsigned char*>(bytes.data()),
                          static_cast<int>(n)) != 1) {
      openssl_failed("GMAC update");
    }
    bytes = bytes.subspan(n);
  }
}

FrameTag FrameMac::tag() {
#if DTRAIN_HAVE_IPSEC_MB
  if (ipsec_) return ipsec_->tag();
#endif
  unsigned char none[16];
  int out_len = 0;
  if (EVP_EncryptFinal_ex(ctx_, none, &out_len) != 1) openssl_failed("GMAC final");
  FrameTag tag;
  if (EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_GCM_GET_TAG, static_cast<int>(kFrameTagBytes),
                          tag.data()) != 1) {
    openssl_failed("reading the GMAC tag");
  }
  return tag;
}

bool FrameMac::verify(const FrameTag& received) {
  const FrameTag expected = tag();
  return CRYPTO_memcmp(expected.data(), received.data(), kFrameTagBytes) == 0;
}

}  // namespace dtrain
