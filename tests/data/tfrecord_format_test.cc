// The TFRecord framing of data/tfrecord_format.h, byte for byte, and its two users: the data
// writer and the TensorBoard event writer frame a record identically. The golden bytes were
// computed apart from dtrain, with a bit-at-a-time CRC-32C and TensorFlow's mask in Python.
#include "data/tfrecord_format.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "metrics/tensorboard_events.h"

namespace dtrain {
namespace {

std::string text_of(std::span<const std::byte> bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

std::span<const std::byte> bytes_of(std::string_view text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

// The record of "abc": length 3, masked CRC of the length, the data, masked CRC of the data.
const std::string kAbcRecord(
    "\x03\0\0\0\0\0\0\0"
    "\xb0\x99\x49\x0e"
    "abc"
    "\x6e\x57\xf1\x21",
    19);

TEST(TfrecordFormat, MaskMatchesTensorFlowsAndUnmaskInvertsIt) {
  // crc32c("123456789") == 0xE3069283; masked by TensorFlow's rule by hand:
  // ((0xE3069283 >> 15) | (0xE3069283 << 17)) + 0xa282ead8.
  const uint32_t crc = 0xE3069283u;
  const uint32_t rotated = (crc >> 15) | (crc << 17);
  EXPECT_EQ(tfrecord::mask_crc(crc), static_cast<uint32_t>(rotated + 0xa282ead8u));
  EXPECT_EQ(tfrecord::unmask_crc(tfrecord::mask_crc(crc)), crc);
}

TEST(TfrecordFormat, HeaderAndFooterAreTensorFlowsBytes) {
  EXPECT_EQ(text_of(tfrecord::record_header(3)), kAbcRecord.substr(0, tfrecord::kHeaderBytes));
  EXPECT_EQ(text_of(tfrecord::record_footer(bytes_of("abc"))), kAbcRecord.substr(15));
  // An empty record: the data's CRC is 0, so its masked CRC is the mask's delta alone.
  EXPECT_EQ(text_of(tfrecord::record_header(0)),
            std::string("\0\0\0\0\0\0\0\0\x29\x03\x98\x07", 12));
  EXPECT_EQ(text_of(tfrecord::record_footer({})), std::string("\xd8\xea\x82\xa2", 4));
}

TEST(TfrecordFormat, FieldsAreLittleEndianAndReadBackWhole) {
  std::byte raw[8];
  tfrecord::put_u64(raw, 0x0102030405060708u);
  EXPECT_EQ(text_of(raw), std::string("\x08\x07\x06\x05\x04\x03\x02\x01", 8));
  EXPECT_EQ(tfrecord::get_u64(raw), 0x0102030405060708u);
  tfrecord::put_u32(raw, 0xfedcba98u);
  EXPECT_EQ(text_of(std::span(raw, 4)), std::string("\x98\xba\xdc\xfe", 4));
  EXPECT_EQ(tfrecord::get_u32(raw), 0xfedcba98u);
}

TEST(TfrecordFormat, TensorBoardEventRecordsAreFramedTheSameWay) {
  EXPECT_EQ(tensorboard::framed_record("abc"), kAbcRecord);
}

}  // namespace
}  // namespace dtrain
