// The frame format: the byte layout of the header, a round trip through encode and decode, and a
// clear FrameError for each way a frame can be broken.
#include "comm/frame.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "base/crc32c.h"
#include "base/error.h"

namespace dtrain {
namespace {

namespace ff = frame_format;
using ::testing::HasSubstr;

constexpr uint64_t kMaxPayload = 1 << 20;
constexpr uint64_t kMaxMeta = 1 << 10;

std::vector<std::byte> meta_bytes(std::string_view text) {
  const auto bytes = std::as_bytes(std::span(text));
  return {bytes.begin(), bytes.end()};
}

std::vector<std::byte> sample_frame() {
  const std::vector<float> a = {1.0f, -2.5f, std::numeric_limits<float>::quiet_NaN()};
  const std::vector<float> b = {};
  const std::vector<float> c = {1e-40f};
  const std::span<const float> tensors[] = {a, b, c};
  return encode_frame(/*type=*/17, /*request_id=*/0x0102030405060708, meta_bytes("shard=3"),
                      tensors);
}

// Throws what decode_frame throws on `frame`, or nothing.
void decode(std::span<const std::byte> frame) { decode_frame(frame, kMaxPayload, kMaxMeta); }

// Rewrites a header field and re-seals the CRC, so that only the field is wrong.
template <typename T>
void patch(std::vector<std::byte>& frame, size_t offset, T value) {
  const std::span<std::byte> all(frame);
  ff::store_le(all.subspan(offset), value);
  const auto head = all.first<ff::kHeaderBytes>();
  const uint32_t crc = crc32c(all.subspan(ff::kHeaderBytes), header_crc(head));
  ff::store_le(all.subspan(ff::kCrcOffset), crc);
}

TEST(FrameFormat, MagicSpellsDtrnOnTheWire) {
  const auto frame = sample_frame();
  EXPECT_EQ(std::memcmp(frame.data(), "DTRN", 4), 0);
  EXPECT_EQ(ff::kHeaderBytes, 28u);
}

TEST(FrameFormat, HeaderFieldsAreLittleEndianAtFixedOffsets) {
  const auto frame = sample_frame();
  EXPECT_EQ(frame[ff::kVersionOffset], std::byte{6});
  EXPECT_EQ(frame[ff::kVersionOffset + 1], std::byte{0});
  EXPECT_EQ(frame[ff::kTypeOffset], std::byte{17});
  EXPECT_EQ(frame[ff::kRequestIdOffset], std::byte{0x08});
  EXPECT_EQ(frame[ff::kRequestIdOffset + 7], std::byte{0x01});
  // payload = meta_len (4) + "shard=3" (7) + 4 floats (16)
  EXPECT_EQ(ff::load_le<uint64_t>(std::span(frame).subspan(ff::kPayloadLenOffset)), 27u);
  EXPECT_EQ(frame.size(), ff::kHeaderBytes + 27);
  EXPECT_EQ(ff::load_le<uint32_t>(std::span(frame).subspan(ff::kHeaderBytes)), 7u);
  // The CRC covers the header bytes before it and the whole payload.
  const uint32_t crc = crc32c(std::span(frame).subspan(ff::kHeaderBytes),
                              crc32c(std::span(frame).first(ff::kCrcOffset)));
  EXPECT_EQ(ff::load_le<uint32_t>(std::span(frame).subspan(ff::kCrcOffset)), crc);
}

TEST(Frame, EncodeDecodeRoundTripKeepsEveryBit) {
  const auto frame = sample_frame();
  const DecodedFrame decoded = decode_frame(frame, kMaxPayload, kMaxMeta);
  EXPECT_EQ(decoded.header.type, 17);
  EXPECT_EQ(decoded.header.request_id, 0x0102030405060708u);
  EXPECT_EQ(decoded.header.payload_len, 27u);
  ASSERT_EQ(decoded.meta.size(), 7u);
  EXPECT_EQ(std::memcmp(decoded.meta.data(), "shard=3", 7), 0);
  ASSERT_EQ(decoded.tensor_bytes.size(), 16u);
  const float expected[] = {1.0f, -2.5f, std::numeric_limits<float>::quiet_NaN(), 1e-40f};
  EXPECT_EQ(std::memcmp(decoded.tensor_bytes.data(), expected, 16), 0);
}

TEST(Frame, EmptyMetaAndNoTensorsIsTheSmallestFrame) {
  const auto frame = encode_frame(16, 0, {}, {});
  EXPECT_EQ(frame.size(), ff::kHeaderBytes + ff::kMetaLenBytes);
  const DecodedFrame decoded = decode_frame(frame, kMaxPayload, kMaxMeta);
  EXPECT_TRUE(decoded.meta.empty());
  EXPECT_TRUE(decoded.tensor_bytes.empty());
}

TEST(Frame, DecodeRejectsBadMagicShowingWhatCame) {
  auto frame = sample_frame();
  std::memcpy(frame.data(), "GET ", 4);
  EXPECT_THAT([&] { decode(frame); },
              ::testing::ThrowsMessage<FrameError>(HasSubstr("bad magic 0x20544547 (\"GET \")")));
}

TEST(Frame, DecodeRejectsAnotherVersion) {
  auto frame = sample_frame();
  patch<uint16_t>(frame, ff::kVersionOffset, 5);  // the build before chunks named their type
  EXPECT_THAT([&] { decode(frame); },
              ::testing::ThrowsMessage<FrameError>(
                  HasSubstr("unsupported frame version 5, this build speaks version 6")));
}

TEST(Frame, DecodeRejectsAPayloadOverTheLimitFromTheHeaderAlone) {
  std::vector<std::byte> header(ff::kHeaderBytes);
  encode_header({.type = 16, .payload_len = uint64_t{1} << 40}, std::span(header).first<28>());
  EXPECT_THAT([&] { decode_header(std::span(header).first<28>(), kMaxPayload); },
              ::testing::ThrowsMessage<FrameError>(HasSubstr(
                  "announces a 1099511627776-byte payload, over the 1048576-byte limit")));
}

TEST(Frame, DecodeRejectsAPayloadTooShortForItsMetaLength) {
  auto frame = sample_frame();
  patch<uint64_t>(frame, ff::kPayloadLenOffset, 3);
  frame.resize(ff::kHeaderBytes + 3);
  EXPECT_THAT([&] { decode(frame); },
              ::testing::ThrowsMessage<FrameError>(HasSubstr("too short for its 4-byte meta")));
}

// Found by fuzz/frame_fuzzer: a length under 4 used to wrap to a layout of about 2^64 tensor bytes.
TEST(Frame, PayloadLayoutRejectsAPayloadTooShortForItsMetaLengthOnItsOwn) {
  for (uint64_t payload_len : {0, 1, 3}) {
    EXPECT_THAT([&] { payload_layout(payload_len, 0, kMaxMeta); },
                ::testing::ThrowsMessage<FrameError>(HasSubstr("too short for its 4-byte meta")))
        << payload_len;
  }
  const PayloadLayout smallest = payload_layout(4, 0, kMaxMeta);
  EXPECT_EQ(smallest.meta_len, 0u);
  EXPECT_EQ(smallest.tensor_bytes, 0u);
}

TEST(Frame, DecodeRejectsAMetaLengthOverrunningThePayload) {
  auto frame = sample_frame();
  patch<uint32_t>(frame, ff::kHeaderBytes, 24);
  EXPECT_THAT([&] { decode(frame); }, ::testing::ThrowsMessage<FrameError>(HasSubstr(
                                          "meta length 24 overruns the 27-byte payload")));
}

TEST(Frame, DecodeRejectsMetaOverItsLimit) {
  const std::vector<std::byte> meta(kMaxMeta + 1);
  const auto frame = encode_frame(16, 0, meta, {});
  EXPECT_THAT([&] { decode(frame); },
              ::testing::ThrowsMessage<FrameError>(HasSubstr("over the 1024-byte limit")));
}

TEST(Frame, DecodeRejectsTensorBytesThatAreNotWholeFloats) {
  auto frame = sample_frame();
  patch<uint32_t>(frame, ff::kHeaderBytes, 8);  // 27 - 4 - 8 = 15 tensor bytes
  EXPECT_THAT([&] { decode(frame); },
              ::testing::ThrowsMessage<FrameError>(HasSubstr("15 tensor bytes are not a whole")));
}

TEST(Frame, DecodeRejectsEverySingleBitFlip) {
  const auto good = sample_frame();
  // Magic, version and lengths fail their own checks; every other bit is caught by the CRC.
  for (size_t i = 0; i < good.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      auto frame = good;
      frame[i] ^= std::byte(1 << bit);
      EXPECT_THROW(decode(frame), FrameError) << "byte " << i << " bit " << bit;
    }
  }
  auto frame = good;
  frame.back() ^= std::byte{0x80};
  EXPECT_THAT([&] { decode(frame); },
              ::testing::ThrowsMessage<FrameError>(HasSubstr("bad CRC32C")));
}

TEST(Frame, DecodeRejectsATruncatedFrame) {
  auto frame = sample_frame();
  frame.pop_back();
  EXPECT_THAT([&] { decode(frame); }, ::testing::ThrowsMessage<FrameError>(HasSubstr(
                                          "has 26 payload bytes but its header announces 27")));
  EXPECT_THAT([&] { decode(std::span(frame).first(10)); },
              ::testing::ThrowsMessage<FrameError>(HasSubstr("too short")));
}

// The fuzzers' seed frames must speak this build's version, or every seed stops at the version
// check and the fuzzer starts from nothing past it.
TEST(FrameFormat, TheFuzzSeedsSpeakThisBuildsFrameVersion) {
  int frames = 0;
  for (const char* target : {"frame", "handshake"}) {
    const auto dir = std::filesystem::path(DTRAIN_SOURCE_DIR) / "fuzz" / "corpus" / target;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      std::ifstream in(entry.path(), std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)), {});
      for (size_t at = bytes.find("DTRN"); at != std::string::npos;
           at = bytes.find("DTRN", at + 1)) {
        ASSERT_GE(bytes.size(), at + ff::kHeaderBytes) << entry.path();
        uint16_t version = 0;
        std::memcpy(&version, bytes.data() + at + ff::kVersionOffset, sizeof(version));
        EXPECT_EQ(version, ff::kVersion) << entry.path() << " at byte " << at;
        ++frames;
      }
    }
  }
  EXPECT_GT(frames, 10);
}

}  // namespace
}  // namespace dtrain
