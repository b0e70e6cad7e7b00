// Frame tags: GMAC (AES-128-GCM over no plaintext) checked against an independent implementation,
// python3-cryptography's AESGCM, and bound to the key, the frame number, the part and every byte.
#include "comm/frame_mac.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

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

TEST(FrameMac, TagsMatchAReferenceGmac) {
  // python3: AESGCM(key).encrypt(struct.pack("<IQ", part, n), b"", data).hex()
  FrameMac mac(reference_key());
  const auto data = reference_data();
  EXPECT_EQ(hex(tag_of(mac, 0, data)), "0bb2d78f65aa78b9c79a818319cde264");
  EXPECT_EQ(hex(tag_of(mac, 1, data)), "e2b46976757d101b62fd6ed408e394b4");
  EXPECT_EQ(hex(tag_of(mac, 0x0102030405060708, data)), "a9f999de9a57d8e9f88a86b740ef8285");
  EXPECT_EQ(hex(tag_of(mac, 0, data, FramePart::kTensors)), "071223e09b6d33be834048a7abf03c0c");
  EXPECT_EQ(hex(tag_of(mac, 0x0102030405060708, data, FramePart::kTensors)),
            "f1668a9a82bc55048f43cc93082ae7e7");
}

TEST(FrameMac, TheTagDependsOnlyOnTheBytesNotOnHowTheyAreSplit) {
  FrameMac mac(reference_key());
  const auto data = reference_data();
  const FrameTag whole = tag_of(mac, 5, data);
  mac.begin(5, FramePart::kOpening);
  const std::span<const std::byte> bytes(data);
  for (size_t at = 0, piece = 1; at < bytes.size(); at += piece, piece = piece * 3 + 1) {
    mac.update(bytes.subspan(at, std::min(piece, bytes.size() - at)));
  }
  EXPECT_TRUE(mac.verify(whole));
}

TEST(FrameMac, AnyAlteredBitOrAnotherFrameNumberOrKeyFailsVerification) {
  FrameMac mac(reference_key());
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
  FrameMac other_mac(other);
  other_mac.begin(3, FramePart::kOpening);
  other_mac.update(data);
  EXPECT_FALSE(other_mac.verify(tag));
  mac.begin(3, FramePart::kOpening);
  mac.update(data);
  EXPECT_TRUE(mac.verify(tag));
}

}  // namespace
}  // namespace dtrain
