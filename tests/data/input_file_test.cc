// InputFile and compression_of: the same bytes come back raw, through gzip (one member or
// several) and through zlib, in reads of any size; truncated or corrupt streams name the file and
// the offset.
#include "data/input_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "support/deflate.h"
#include "support/temp_dir.h"

namespace dtrain {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::TempDir;
using testing::write_bytes;

std::string gzip(const std::string& data) { return testing::deflated(data, 16 + MAX_WBITS); }
std::string zlib(const std::string& data) { return testing::deflated(data, MAX_WBITS); }

// Distinct bytes that do not compress to nothing: a quarter of a megabyte of a simple sequence.
std::string sample_bytes(size_t n = 300000) {
  std::string bytes(n, '\0');
  uint32_t x = 12345;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1103515245 + 12345;
    bytes[i] = static_cast<char>((x >> 16) % 7 + i % 5);
  }
  return bytes;
}

// Everything the file yields, read in pieces of `chunk` bytes.
std::string read_all(InputFile& file, size_t chunk) {
  std::string all;
  std::vector<std::byte> buffer(chunk);
  for (size_t got; (got = file.read(buffer)) > 0;) {
    all.append(reinterpret_cast<const char*>(buffer.data()), got);
  }
  return all;
}

TEST(InputFileCompression, AutoFollowsTheSuffixAndAnExplicitChoiceWins) {
  EXPECT_EQ(compression_of("a/train.tfrecords.gz", Compression::kAuto), Compression::kGzip);
  EXPECT_EQ(compression_of("train.tfrecords.zlib", Compression::kAuto), Compression::kZlib);
  EXPECT_EQ(compression_of("train.csv", Compression::kAuto), Compression::kNone);
  EXPECT_EQ(compression_of("gz/train.csv", Compression::kAuto), Compression::kNone);
  EXPECT_EQ(compression_of("train.csv", Compression::kGzip), Compression::kGzip);
  EXPECT_EQ(compression_of("train.csv.gz", Compression::kNone), Compression::kNone);
}

TEST(InputFileRead, RawGzipAndZlibGiveBackTheSameBytesInAnyReadSize) {
  TempDir dir;
  const std::string data = sample_bytes();
  write_bytes(dir / "raw", data);
  write_bytes(dir / "gz", gzip(data));
  write_bytes(dir / "zlib", zlib(data));
  for (size_t chunk : {size_t{1} << 20, size_t{4093}, size_t{1}}) {
    InputFile raw(dir / "raw", Compression::kNone);
    InputFile gz(dir / "gz", Compression::kGzip);
    InputFile z(dir / "zlib", Compression::kZlib);
    EXPECT_EQ(read_all(raw, chunk), data) << chunk;
    EXPECT_EQ(read_all(gz, chunk), data) << chunk;
    EXPECT_EQ(read_all(z, chunk), data) << chunk;
    EXPECT_EQ(gz.offset(), data.size());
    EXPECT_EQ(z.offset(), data.size());
  }
}

TEST(InputFileRead, ConcatenatedGzipMembersReadAsOneStream) {
  TempDir dir;
  write_bytes(dir / "two.gz", gzip("first member, ") + gzip("") + gzip("second member"));
  InputFile file(dir / "two.gz", Compression::kGzip);
  EXPECT_EQ(read_all(file, 7), "first member, second member");
}

TEST(InputFileRead, AnEmptyFileIsAnEmptyStreamInEveryCompression) {
  TempDir dir;
  write_bytes(dir / "empty", "");
  for (Compression c : {Compression::kNone, Compression::kGzip, Compression::kZlib}) {
    InputFile file(dir / "empty", c);
    std::vector<std::byte> buffer(16);
    EXPECT_EQ(file.read(buffer), 0u);
    EXPECT_FALSE(file.read_exactly(buffer, "header"));
  }
}

TEST(InputFileRead, ReadExactlyNamesWhatWasTruncatedAndWhere) {
  TempDir dir;
  write_bytes(dir / "short", "0123456789");
  InputFile file(dir / "short", Compression::kNone);
  std::vector<std::byte> header(8);
  ASSERT_TRUE(file.read_exactly(header, "header"));
  EXPECT_EQ(file.offset(), 8u);
  try {
    file.read_exactly(header, "record length");
    FAIL() << "a read past the end was accepted";
  } catch (const DataError& e) {
    EXPECT_THAT(e.what(),
                AllOf(HasSubstr((dir / "short").string()), HasSubstr("record length"),
                      HasSubstr("at byte 8"), HasSubstr("needs 8 bytes"), HasSubstr("holds 2")));
  }
}

TEST(InputFileRead, ATruncatedGzipStreamIsADataErrorNamingTheFileAndOffset) {
  TempDir dir;
  const std::string data = sample_bytes();
  const std::string packed = gzip(data);
  write_bytes(dir / "cut.gz", packed.substr(0, packed.size() / 2));
  InputFile file(dir / "cut.gz", Compression::kGzip);
  try {
    read_all(file, 4096);
    FAIL() << "a truncated gzip stream was accepted";
  } catch (const DataError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr((dir / "cut.gz").string()),
                                HasSubstr("truncated gzip stream at byte")));
  }
}

TEST(InputFileRead, ACorruptZlibStreamIsADataError) {
  TempDir dir;
  std::string packed = zlib(sample_bytes());
  for (size_t i = 40; i < 80; ++i) packed[i] = static_cast<char>(~packed[i]);
  write_bytes(dir / "bad.zlib", packed);
  InputFile file(dir / "bad.zlib", Compression::kZlib);
  EXPECT_THAT([&] { read_all(file, 4096); },
              ::testing::ThrowsMessage<DataError>(
                  AllOf(HasSubstr("bad.zlib"), HasSubstr("zlib stream at byte"))));
}

TEST(InputFileRead, RawBytesReadAsGzipAreACorruptStream) {
  TempDir dir;
  write_bytes(dir / "plain.gz", "this is not gzip at all");
  InputFile file(dir / "plain.gz", Compression::kGzip);
  EXPECT_THAT([&] { read_all(file, 64); },
              ::testing::ThrowsMessage<DataError>(
                  AllOf(HasSubstr("plain.gz"), HasSubstr("corrupt gzip stream at byte 0"))));
}

TEST(InputFileRead, BytesAfterAZlibStreamAreRefused) {
  TempDir dir;
  write_bytes(dir / "tail.zlib", zlib("payload") + "junk");
  InputFile file(dir / "tail.zlib", Compression::kZlib);
  EXPECT_THAT([&] { read_all(file, 64); },
              ::testing::ThrowsMessage<DataError>(
                  AllOf(HasSubstr("tail.zlib"), HasSubstr("trailing bytes"))));
}

TEST(InputFileOpen, AMissingFileOrADirectoryIsADataErrorNamingIt) {
  TempDir dir;
  EXPECT_THAT([&] { InputFile(dir / "absent.csv", Compression::kNone); },
              ::testing::ThrowsMessage<DataError>(
                  AllOf(HasSubstr("absent.csv"), HasSubstr("cannot open"))));
  EXPECT_THAT([&] { InputFile(dir.path(), Compression::kGzip); },
              ::testing::ThrowsMessage<DataError>(HasSubstr("is a directory")));
}

}  // namespace
}  // namespace dtrain
