// TfRecordReader and TfRecordWriter: records round trip in every compression; the bytes are
// TensorFlow's framing (a record checked by hand); a flipped bit in a length, a CRC or the data,
// and a truncated file, are each named with the record and the byte offset where it starts.
#include "data/tfrecord.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "data/tfrecord_format.h"
#include "support/temp_dir.h"

namespace dtrain {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::read_bytes;
using testing::TempDir;
using ::testing::ThrowsMessage;
using testing::write_bytes;

// Records of lengths 0, 1, 3, ... (and one of 100 kB), each with distinct contents.
std::vector<std::string> sample_records() {
  std::vector<std::string> records;
  for (size_t length : {0, 1, 3, 100, 784, 100000}) {
    std::string record(length, '\0');
    for (size_t i = 0; i < length; ++i) record[i] = static_cast<char>(i * 31 + length);
    records.push_back(record);
  }
  return records;
}

void write_records(const std::filesystem::path& path, Compression compression,
                   const std::vector<std::string>& records) {
  TfRecordWriter writer(path, compression);
  for (const std::string& record : records) writer.write(record);
  writer.commit();
  EXPECT_EQ(writer.records_written(), records.size());
  EXPECT_EQ(writer.file_bytes(), std::filesystem::file_size(path));
}

std::vector<std::string> read_records(const std::filesystem::path& path, Compression compression) {
  TfRecordReader reader(path, compression);
  std::vector<std::string> records;
  for (std::string record; reader.next(record);) records.push_back(record);
  return records;
}

// Offsets at which each record of sample_records() starts in an uncompressed file.
std::vector<uint64_t> record_offsets(const std::vector<std::string>& records) {
  std::vector<uint64_t> offsets;
  uint64_t at = 0;
  for (const std::string& record : records) {
    offsets.push_back(at);
    at += tfrecord::kHeaderBytes + record.size() + tfrecord::kFooterBytes;
  }
  return offsets;
}

TEST(TfrecordWriter, WritesTensorFlowsFramingByteForByte) {
  TempDir dir;
  write_records(dir / "one.tfrecord", Compression::kNone, {"abc"});
  const std::string bytes = read_bytes(dir / "one.tfrecord");
  ASSERT_EQ(bytes.size(), 8u + 4 + 3 + 4);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x03\0\0\0\0\0\0\0", 8));
  const auto as_span = [](const std::string& s) {
    return std::as_bytes(std::span(s.data(), s.size()));
  };
  const std::byte* raw = reinterpret_cast<const std::byte*>(bytes.data());
  EXPECT_EQ(tfrecord::get_u32(raw + 8), tfrecord::mask_crc(crc32c(as_span(bytes.substr(0, 8)))));
  EXPECT_EQ(bytes.substr(12, 3), "abc");
  EXPECT_EQ(tfrecord::get_u32(raw + 15), tfrecord::mask_crc(crc32c(as_span("abc"))));
}

TEST(TfrecordRoundTrip, EveryCompressionGivesBackTheSameRecords) {
  TempDir dir;
  const std::vector<std::string> records = sample_records();
  for (Compression c : {Compression::kNone, Compression::kGzip, Compression::kZlib}) {
    const auto path = dir / "r.tfrecord";
    write_records(path, c, records);
    EXPECT_EQ(read_records(path, c), records) << static_cast<int>(c);
  }
}

TEST(TfrecordRoundTrip, CompressionFollowsTheNameWhenAuto) {
  TempDir dir;
  write_records(dir / "r.tfrecord.gz", Compression::kGzip, {"x", "yz"});
  write_records(dir / "r.tfrecord.zlib", Compression::kZlib, {"x", "yz"});
  EXPECT_EQ(read_bytes(dir / "r.tfrecord.gz").substr(0, 2), "\x1f\x8b");
  EXPECT_EQ(read_records(dir / "r.tfrecord.gz", Compression::kAuto),
            (std::vector<std::string>{"x", "yz"}));
  EXPECT_EQ(read_records(dir / "r.tfrecord.zlib", Compression::kAuto),
            (std::vector<std::string>{"x", "yz"}));
}

TEST(TfrecordReader, AnEmptyFileHoldsNoRecords) {
  TempDir dir;
  write_bytes(dir / "empty.tfrecord", "");
  EXPECT_TRUE(read_records(dir / "empty.tfrecord", Compression::kNone).empty());
  write_records(dir / "none.tfrecord.gz", Compression::kGzip, {});
  EXPECT_TRUE(read_records(dir / "none.tfrecord.gz", Compression::kGzip).empty());
}

TEST(TfrecordReader, ReportsTheOffsetOfEachRecord) {
  TempDir dir;
  const std::vector<std::string> records = sample_records();
  write_records(dir / "r.tfrecord", Compression::kNone, records);
  TfRecordReader reader(dir / "r.tfrecord", Compression::kNone);
  std::string record;
  for (uint64_t offset : record_offsets(records)) {
    ASSERT_TRUE(reader.next(record));
    EXPECT_EQ(reader.record_offset(), offset);
  }
  EXPECT_FALSE(reader.next(record));
  EXPECT_EQ(reader.records_read(), records.size());
}

// Flips one bit of the file at byte `at` and expects reading to fail naming `expected` parts.
void expect_flip_fails(const std::filesystem::path& path, size_t at,
                       const std::vector<std::string>& expected) {
  std::string bytes = read_bytes(path);
  bytes[at] = static_cast<char>(bytes[at] ^ 0x10);
  write_bytes(path, bytes);
  try {
    read_records(path, Compression::kNone);
    FAIL() << "a flipped bit at byte " << at << " was accepted";
  } catch (const DataError& e) {
    EXPECT_THAT(e.what(), HasSubstr(path.string()));
    for (const std::string& part : expected) EXPECT_THAT(e.what(), HasSubstr(part)) << at;
  }
}

TEST(TfrecordReader, AFlippedBitInTheLengthFailsTheLengthCrcAtThatRecord) {
  TempDir dir;
  const std::vector<std::string> records = sample_records();
  write_records(dir / "r.tfrecord", Compression::kNone, records);
  const uint64_t third = record_offsets(records)[2];
  expect_flip_fails(
      dir / "r.tfrecord", third + 1,
      {"record 2 (starting at byte " + std::to_string(third) + ")", "CRC of its length"});
}

TEST(TfrecordReader, AFlippedBitInTheLengthCrcFailsTheLengthCrc) {
  TempDir dir;
  const std::vector<std::string> records = sample_records();
  write_records(dir / "r.tfrecord", Compression::kNone, records);
  const uint64_t fourth = record_offsets(records)[3];
  expect_flip_fails(
      dir / "r.tfrecord", fourth + 9,
      {"record 3 (starting at byte " + std::to_string(fourth) + ")", "CRC of its length"});
}

TEST(TfrecordReader, AFlippedBitInTheDataFailsTheDataCrc) {
  TempDir dir;
  const std::vector<std::string> records = sample_records();
  write_records(dir / "r.tfrecord", Compression::kNone, records);
  const uint64_t fifth = record_offsets(records)[4];
  expect_flip_fails(dir / "r.tfrecord", fifth + 12 + 500,
                    {"record 4 (starting at byte " + std::to_string(fifth) + ")",
                     "CRC of its 784 bytes of data"});
}

TEST(TfrecordReader, AFlippedBitInTheDataCrcFailsTheDataCrc) {
  TempDir dir;
  const std::vector<std::string> records = sample_records();
  write_records(dir / "r.tfrecord", Compression::kNone, records);
  const uint64_t second = record_offsets(records)[1];
  expect_flip_fails(
      dir / "r.tfrecord", second + 12 + 1 + 2,
      {"record 1 (starting at byte " + std::to_string(second) + ")", "CRC of its 1 bytes of data"});
}

TEST(TfrecordReader, AHugeLengthWithAValidCrcIsRefusedBeforeAllocating) {
  TempDir dir;
  std::string header(12, '\0');
  auto* raw = reinterpret_cast<std::byte*>(header.data());
  tfrecord::put_u64(raw, uint64_t{1} << 40);
  tfrecord::put_u32(raw + 8, tfrecord::masked_crc32c(std::span(raw, 8)));
  write_bytes(dir / "huge.tfrecord", header);
  EXPECT_THAT([&] { read_records(dir / "huge.tfrecord", Compression::kNone); },
              ThrowsMessage<DataError>(AllOf(HasSubstr("huge.tfrecord"),
                                             HasSubstr("record 0 (starting at byte 0)"),
                                             HasSubstr("length 1099511627776 is over the limit"))));
}

TEST(TfrecordReader, ALengthUnderTheLimitThatTheFileDoesNotHoldIsTruncation) {
  TempDir dir;
  std::string bytes(12, '\0');
  auto* raw = reinterpret_cast<std::byte*>(bytes.data());
  tfrecord::put_u64(raw, uint64_t{200} << 20);
  tfrecord::put_u32(raw + 8, tfrecord::masked_crc32c(std::span(raw, 8)));
  bytes += std::string(3 << 20, 'x');  // past the first chunk the reader allocates
  write_bytes(dir / "short.tfrecord", bytes);
  EXPECT_THAT([&] { read_records(dir / "short.tfrecord", Compression::kNone); },
              ThrowsMessage<DataError>(AllOf(HasSubstr("short.tfrecord"), HasSubstr("truncated"),
                                             HasSubstr("record 0 (starting at byte 0)"))));
}

TEST(TfrecordReader, ATruncatedRecordNamesTheRecordWhereverTheFileEnds) {
  TempDir dir;
  const std::vector<std::string> records = sample_records();
  write_records(dir / "r.tfrecord", Compression::kNone, records);
  const std::string whole = read_bytes(dir / "r.tfrecord");
  const uint64_t last = record_offsets(records).back();
  // Inside the header, at the end of the header, inside the data, inside the footer.
  for (uint64_t cut : {last + 5, last + 12, last + 12 + 99, whole.size() - 1}) {
    write_bytes(dir / "cut.tfrecord", whole.substr(0, cut));
    EXPECT_THAT([&] { read_records(dir / "cut.tfrecord", Compression::kNone); },
                ThrowsMessage<DataError>(
                    AllOf(HasSubstr("cut.tfrecord"), HasSubstr("truncated"),
                          HasSubstr("record 5 (starting at byte " + std::to_string(last) + ")"))))
        << cut;
  }
}

TEST(TfrecordReader, ATruncatedGzipFileIsADataError) {
  TempDir dir;
  write_records(dir / "r.tfrecord.gz", Compression::kGzip, sample_records());
  const std::string whole = read_bytes(dir / "r.tfrecord.gz");
  write_bytes(dir / "cut.tfrecord.gz", whole.substr(0, whole.size() - 20));
  EXPECT_THAT([&] { read_records(dir / "cut.tfrecord.gz", Compression::kAuto); },
              ThrowsMessage<DataError>(HasSubstr("cut.tfrecord.gz")));
}

TEST(TfrecordWriter, AWriterNotCommittedLeavesNoFile) {
  TempDir dir;
  {
    TfRecordWriter writer(dir / "never.tfrecord", Compression::kGzip);
    writer.write("lost");
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "never.tfrecord"));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

}  // namespace
}  // namespace dtrain
