// CRC-32C: the standard check value, chaining, and the edges.
#include "base/crc32c.h"

#include <gtest/gtest.h>

#include <string_view>
#include <vector>

namespace dtrain {
namespace {

std::span<const std::byte> bytes_of(std::string_view text) {
  return std::as_bytes(std::span(text));
}

TEST(Crc32c, MatchesTheStandardCheckValue) {
  // The check value of CRC-32C (iSCSI, RFC 3720), as catalogued by Greg Cook's CRC RevEng.
  EXPECT_EQ(crc32c(bytes_of("123456789")), 0xE3069283u);
}

TEST(Crc32c, MatchesRfc3720TestVectors) {
  // RFC 3720 appendix B.4: 32 bytes of zeros, then of 0xFF.
  std::vector<std::byte> zeros(32, std::byte{0x00});
  std::vector<std::byte> ones(32, std::byte{0xFF});
  EXPECT_EQ(crc32c(zeros), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones), 0x62A8AB43u);
}

TEST(Crc32c, ChainingEqualsOnePassAtEverySplit) {
  const std::string_view text = "The quick brown fox jumps over the lazy dog";
  const uint32_t whole = crc32c(bytes_of(text));
  for (size_t split = 0; split <= text.size(); ++split) {
    EXPECT_EQ(crc32c(bytes_of(text.substr(split)), crc32c(bytes_of(text.substr(0, split)))), whole)
        << "split at " << split;
  }
}

TEST(Crc32c, EmptyInputLeavesTheCrcUnchanged) {
  EXPECT_EQ(crc32c({}), 0u);
  EXPECT_EQ(crc32c({}, 0xE3069283u), 0xE3069283u);
}

}  // namespace
}  // namespace dtrain
