// The library's direct GMAC calls: one manager, set up once for this CPU, lends its function
// pointers; they keep no state of their own, so every connection's thread may call them at once.
#include "comm/gmac_ipsec_mb.h"

#include <intel-ipsec-mb.h>

#include "base/error.h"

namespace dtrain {

namespace {

IMB_MGR& manager() {
  static IMB_MGR* const mgr = [] {
    IMB_MGR* m = alloc_mb_mgr(0);
    if (m == nullptr) throw Error("frame authentication: ipsec-mb could not allocate its manager");
    init_mb_mgr_auto(m, nullptr);
    if (imb_get_errno(m) != 0) {
      throw Error(std::string("frame authentication: ipsec-mb: ") +
                  imb_get_strerror(imb_get_errno(m)));
    }
    return m;
  }();
  return *mgr;
}

}  // namespace

struct IpsecGmac::State {
  alignas(64) gcm_key_data key;
  alignas(64) gcm_context_data context;
};

IpsecGmac::IpsecGmac(const FrameKey& key) : state_(std::make_unique<State>()) {
  IMB_AES128_GCM_PRE(&manager(), reinterpret_cast<const uint8_t*>(key.data()), &state_->key);
}

IpsecGmac::~IpsecGmac() = default;

void IpsecGmac::begin(const std::array<unsigned char, kGmacNonceBytes>& nonce) {
  IMB_AES128_GMAC_INIT(&manager(), &state_->key, &state_->context, nonce.data(), nonce.size());
}

void IpsecGmac::update(std::span<const std::byte> bytes) {
  if (bytes.empty()) return;
  IMB_AES128_GMAC_UPDATE(&manager(), &state_->key, &state_->context,
                         reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

FrameTag IpsecGmac::tag() {
  FrameTag tag;
  IMB_AES128_GMAC_FINALIZE(&manager(), &state_->key, &state_->context,
                           reinterpret_cast<uint8_t*>(tag.data()), tag.size());
  return tag;
}

const char* IpsecGmac::kernels() {
  switch (manager().used_arch) {
    case IMB_ARCH_AVX512:
      return "AVX-512";
    case IMB_ARCH_AVX2:
      return "AVX2";
    case IMB_ARCH_AVX:
      return "AVX";
    case IMB_ARCH_SSE:
      return "SSE";
    default:
      return "no AES-NI";
  }
}

}  // namespace dtrain
