// Frame tags: GMAC (AES-128-GCM over no plaintext) checked against an independent implementation,
// python3-cryptography's AESGCM, and bound to the key, the frame number, the part and every byte;
// each engine built in (OpenSSL, ipsec-mb) on its own, and the two against each other.
#include "comm/frame_mac.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace dtrain {
namespace {

// key = bytes(range(16)); data[i] = (7 * i) % 256, 100000 bytes.
FrameKey reference_key() {
  FrameKey key;
  for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<std::byte>(i);
  return key;
}

std::vector<std::byte> reference_data() {
  std::vector<std::byte> data(100000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>((7 * i) % 256);
  return data;
}

std::string hex(const FrameTag& tag) {
  std::string text;
  for (std::byte b : tag) text += fmt::format("{:02x}", static_cast<unsigned>(b));
  return text;
}

FrameTag tag_of(FrameMac& mac, uint64_t frame, std::span<const std::byte> data,
                FramePart part = FramePart::kOpening) {
  mac.begin(frame, part);
  mac.update(data);
  return mac.tag();
}

class FrameMacOf : public ::testing::TestWithParam<MacEngine> {
 protected:
  void SetUp() override {
    if (!mac_engine_available(GetParam())) GTEST_SKIP() << "ipsec-mb is not built in";
  }
};

std::string engine_name(const ::testing::TestParamInfo<MacEngine>& info) {
  return info.param == MacEngine::kIpsecMb ? "IpsecMb" : "OpenSsl";
}

INSTANTIATE_TEST_SUITE_P(Engines, FrameMacOf,
                         ::testing::Values(MacEngine::kOpenSsl, MacEngine::kIpsecMb), engine_name);

TEST_P(FrameMacOf, TagsMatchAReferenceGmac) {
  // python3: AESGCM(key).encrypt(struct.pack("<IQ", part, n), b"", data).hex()
  FrameMac mac(reference_key(), GetParam());
  const auto data = reference_data();
  EXPECT_EQ(hex(tag_of(mac, 0, data)), "0bb2d78f65aa78b9c79a818319cde264");
  EXPECT_EQ(hex(tag_of(mac, 1, data)), "e2b46976757d101b62fd6ed408e394b4");
  EXPECT_EQ(hex(tag_of(mac, 0x0102030405060708, data)), "a9f999de9a57d8e9f88a86b740ef8285");
  EXPECT_EQ(hex(tag_of(mac, 0, data, FramePart::kTensors)), "071223e09b6d33be834048a7abf03c0c");
  EXPECT_EQ(hex(tag_of(mac, 0x0102030405060708, data, FramePart::kTensors)),
            "f1668a9a82bc55048f43cc93082ae7e7");
}

TEST_P(FrameMacOf, TheTagDependsOnlyOnTheBytesNotOnHowTheyAreSplit) {
  FrameMac mac(reference_key(), GetParam());
  const auto data = reference_data();
  const FrameTag whole = tag_of(mac, 5, data);
  mac.begin(5, FramePart::kOpening);
  const std::span<const std::byte> bytes(data);
  for (size_t at = 0, piece = 1; at < bytes.size(); at += piece, piece = piece * 3 + 1) {
    mac.update(bytes.subspan(at, std::min(piece, bytes.size() - at)));
  }
  EXPECT_TRUE(mac.verify(whole));
}

TEST_P(FrameMacOf, AnyAlteredBitOrAnotherFrameNumberOrKeyFailsVerification) {
  FrameMac mac(reference_key(), GetParam());
  auto data = reference_data();
  const FrameTag tag = tag_of(mac, 3, data);
  mac.begin(4, FramePart::kOpening);  // the same frame replayed as the next one
  mac.update(data);
  EXPECT_FALSE(mac.verify(tag));
  mac.begin(3, FramePart::kTensors);  // an opening's bytes passed off as a frame's tensors
  mac.update(data);
  EXPECT_FALSE(mac.verify(tag));
  data[77777] ^= std::byte{0x01};
  mac.begin(3, FramePart::kOpening);
  mac.update(data);
  EXPECT_FALSE(mac.verify(tag));
  data[77777] ^= std::byte{0x01};
  FrameKey other = reference_key();
  other[15] ^= std::byte{0x80};
  FrameMac other_mac(other, GetParam());
  other_mac.begin(3, FramePart::kOpening);
  other_mac.update(data);
  EXPECT_FALSE(other_mac.verify(tag));
  mac.begin(3, FramePart::kOpening);
  mac.update(data);
  EXPECT_TRUE(mac.verify(tag));
}

// Peers built with and without ipsec-mb must agree on every tag: random lengths (the ragged ends
// of 16-byte blocks), random splits, random keys, both parts.
TEST(FrameMac, IpsecMbAndOpenSslAgreeOnEveryTag) {
  if (!mac_engine_available(MacEngine::kIpsecMb)) GTEST_SKIP() << "ipsec-mb is not built in";
  std::mt19937_64 random(20261128);
  for (int trial = 0; trial < 300; ++trial) {
    FrameKey key;
    for (std::byte& b : key) b = static_cast<std::byte>(random());
    FrameMac openssl(key, MacEngine::kOpenSsl);
    FrameMac ipsec(key, MacEngine::kIpsecMb);
    std::vector<std::byte> data(random() % 20000);
    for (std::byte& b : data) b = static_cast<std::byte>(random());
    const uint64_t frame = random();
    const FramePart part = trial % 2 == 0 ? FramePart::kOpening : FramePart::kTensors;
    ipsec.begin(frame, part);
    for (size_t at = 0; at < data.size();) {
      const size_t piece = std::min<size_t>(random() % 200, data.size() - at);
      ipsec.update(std::span(data).subspan(at, piece));
      at += piece;
    }
    const FrameTag tag = ipsec.tag();
    EXPECT_EQ(hex(tag), hex(tag_of(openssl, frame, data, part)))
        << "trial " << trial << ", " << data.size() << " bytes";
  }
}

}  // namespace
}  // namespace dtrain
