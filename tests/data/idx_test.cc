// read_idx: round trips through raw and gzipped files, and one test per way a file can be
// malformed, each checking that the error names the file and the figures.
#include "data/idx.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "support/temp_dir.h"

namespace dtrain {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Bytes = std::vector<uint8_t>;
using testing::TempDir;

Bytes idx_bytes(const std::vector<uint32_t>& dims, const Bytes& data, uint8_t type = 0x08) {
  Bytes bytes = {0, 0, type, static_cast<uint8_t>(dims.size())};
  for (uint32_t dim : dims) {
    for (int shift = 24; shift >= 0; shift -= 8)
      bytes.push_back(static_cast<uint8_t>(dim >> shift));
  }
  bytes.insert(bytes.end(), data.begin(), data.end());
  return bytes;
}

Bytes iota_bytes(size_t n) {
  Bytes bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(i * 7);
  return bytes;
}

void write_raw(const std::filesystem::path& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

void write_gzip(const std::filesystem::path& path, const Bytes& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr) << path;
  ASSERT_EQ(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(file), Z_OK);
}

Bytes read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The message of the DataError that reading path throws; fails the test if it throws nothing.
std::string read_idx_error(const std::filesystem::path& path) {
  try {
    read_idx(path);
  } catch (const DataError& e) {
    return e.what();
  }
  ADD_FAILURE() << "read_idx(" << path << ") did not throw DataError";
  return "";
}

TEST(ReadIdx, RoundTripsAThreeDimensionalRawFile) {
  TempDir dir;
  const auto path = dir.path() / "images-idx3-ubyte";
  const Bytes data = iota_bytes(3 * 4 * 5);
  write_raw(path, idx_bytes({3, 4, 5}, data));

  const IdxArray array = read_idx(path);

  EXPECT_THAT(array.dims, ElementsAre(3u, 4u, 5u));
  EXPECT_EQ(array.data, data);
}

TEST(ReadIdx, ReadsEveryRankFromOneToFour) {
  TempDir dir;
  const std::vector<std::vector<uint32_t>> shapes = {{6}, {2, 3}, {1, 2, 3}, {1, 2, 1, 3}};
  for (const auto& dims : shapes) {
    const auto path = dir.path() / ("rank" + std::to_string(dims.size()));
    write_raw(path, idx_bytes(dims, iota_bytes(6)));
    const IdxArray array = read_idx(path);
    EXPECT_EQ(array.dims, dims);
    EXPECT_EQ(array.data, iota_bytes(6));
  }
}

TEST(ReadIdx, EmptyDimensionGivesEmptyData) {
  TempDir dir;
  const auto path = dir.path() / "empty-idx3-ubyte";
  write_raw(path, idx_bytes({0, 28, 28}, {}));

  const IdxArray array = read_idx(path);

  EXPECT_THAT(array.dims, ElementsAre(0u, 28u, 28u));
  EXPECT_TRUE(array.data.empty());
}

TEST(ReadIdx, GzipFileReadsTheSameAsRaw) {
  TempDir dir;
  const Bytes file = idx_bytes({50, 28, 28}, iota_bytes(50 * 28 * 28));
  write_raw(dir.path() / "raw", file);
  write_gzip(dir.path() / "compressed.gz", file);

  const IdxArray raw = read_idx(dir.path() / "raw");
  const IdxArray gz = read_idx(dir.path() / "compressed.gz");

  EXPECT_EQ(gz.dims, raw.dims);
  EXPECT_EQ(gz.data, raw.data);
}

TEST(ReadIdx, GzipIsDetectedByMagicNotByName) {
  TempDir dir;
  const Bytes file = idx_bytes({4}, {1, 2, 3, 4});
  write_gzip(dir.path() / "labels-idx1-ubyte", file);    // gzipped, plain name
  write_raw(dir.path() / "labels-idx1-ubyte.gz", file);  // raw, .gz name

  EXPECT_THAT(read_idx(dir.path() / "labels-idx1-ubyte").data, ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(read_idx(dir.path() / "labels-idx1-ubyte.gz").data, ElementsAre(1, 2, 3, 4));
}

TEST(ReadIdx, MissingFileNamesPathAndFetchScript) {
  TempDir dir;
  const auto path = dir.path() / "train-images-idx3-ubyte";

  EXPECT_THAT(read_idx_error(path), AllOf(HasSubstr(path.string()), HasSubstr("no such file"),
                                          HasSubstr("scripts/fetch_mnist.sh")));
}

TEST(ReadIdx, WrongMagicNamesFileAndMagic) {
  TempDir dir;
  const auto path = dir.path() / "not-idx";
  Bytes file = idx_bytes({2}, {0, 0});
  file[0] = 0x12;
  file[1] = 0x34;
  write_raw(path, file);

  EXPECT_THAT(read_idx_error(path),
              AllOf(HasSubstr(path.string()), HasSubstr("bad magic 0x12340801"),
                    HasSubstr("first two bytes must be 0")));
}

TEST(ReadIdx, UnsupportedTypeNamesTheType) {
  TempDir dir;
  const auto path = dir.path() / "floats-idx1";
  write_raw(path, idx_bytes({1}, {0, 0, 0, 0}, 0x0D));

  EXPECT_THAT(read_idx_error(path),
              AllOf(HasSubstr(path.string()), HasSubstr("unsupported element type 0x0d (float32)"),
                    HasSubstr("only 0x08 (unsigned byte)")));
}

TEST(ReadIdx, ZeroOrFiveDimensionsAreRejectedWithTheCount) {
  TempDir dir;
  const auto zero = dir.path() / "zero-dims";
  const auto five = dir.path() / "five-dims";
  write_raw(zero, idx_bytes({}, {}));
  write_raw(five, idx_bytes({1, 1, 1, 1, 1}, {9}));

  EXPECT_THAT(read_idx_error(zero), AllOf(HasSubstr(zero.string()),
                                          HasSubstr("bad number of dimensions 0: must be 1 to 4")));
  EXPECT_THAT(read_idx_error(five), AllOf(HasSubstr(five.string()),
                                          HasSubstr("bad number of dimensions 5: must be 1 to 4")));
}

TEST(ReadIdx, TruncatedMagicNamesFileAndByteCounts) {
  TempDir dir;
  const auto path = dir.path() / "two-bytes";
  write_raw(path, {0, 0});

  EXPECT_THAT(read_idx_error(path),
              AllOf(HasSubstr(path.string()),
                    HasSubstr("truncated header: the magic needs 4 bytes, file holds 2")));
}

TEST(ReadIdx, TruncatedHeaderNamesFileAndByteCounts) {
  TempDir dir;
  const auto path = dir.path() / "short-header-idx3-ubyte";
  Bytes file = idx_bytes({60000, 28, 28}, {});
  file.resize(8);  // magic and the first dimension only
  write_raw(path, file);

  EXPECT_THAT(
      read_idx_error(path),
      AllOf(HasSubstr(path.string()),
            HasSubstr("truncated header: 3 dimensions need 16 header bytes, file holds 8")));
}

TEST(ReadIdx, TruncatedDataNamesFileAndByteCounts) {
  TempDir dir;
  const auto path = dir.path() / "train-images-idx3-ubyte";
  write_raw(path, idx_bytes({60000, 28, 28}, iota_bytes(1000)));

  EXPECT_THAT(
      read_idx_error(path),
      AllOf(HasSubstr(path.string()),
            HasSubstr("truncated: header promises 47040000 bytes of data, file holds 1000")));
}

TEST(ReadIdx, TruncatedDataInGzipFileCountsDecompressedBytes) {
  TempDir dir;
  const auto path = dir.path() / "train-labels-idx1-ubyte.gz";
  write_gzip(path, idx_bytes({60000}, iota_bytes(59999)));

  EXPECT_THAT(read_idx_error(path),
              AllOf(HasSubstr(path.string()),
                    HasSubstr("truncated: header promises 60000 bytes of data, file holds 59999")));
}

TEST(ReadIdx, HugePromiseInCorruptHeaderFailsAsTruncatedNotOutOfMemory) {
  TempDir dir;
  const auto path = dir.path() / "huge";
  write_raw(path, idx_bytes({0xFFFFFFFF, 0xFFFFFFFF}, iota_bytes(10)));

  EXPECT_THAT(
      read_idx_error(path),
      AllOf(HasSubstr(path.string()),
            HasSubstr("header promises 18446744065119617025 bytes of data, file holds 10")));
}

// Deflate never passes 1032:1, so a small gzip file that promises gigabytes is refused from its
// header and its size, before a buffer is grown towards the promise.
TEST(ReadIdx, GzipPromiseBeyondWhatItsSizeCanDecodeToIsRefusedFromTheHeader) {
  TempDir dir;
  const auto path = dir.path() / "train-images-idx3-ubyte.gz";
  write_gzip(path, idx_bytes({60000, 28, 28}, Bytes(1000)));
  const uintmax_t compressed = std::filesystem::file_size(path);
  ASSERT_LT(compressed * 1032, 60000u * 28 * 28);

  EXPECT_THAT(read_idx_error(path),
              AllOf(HasSubstr(path.string()),
                    HasSubstr(fmt::format("truncated: header promises 47040000 bytes of data, "
                                          "more than the {} a gzip file of {} bytes can decode to",
                                          compressed * 1032, compressed))));
}

// A file that holds what its header promises, but more than the memory allowed, is refused before
// its data is read, naming the file, the size and the limit.
TEST(ReadIdx, DataBeyondTheMemoryLimitIsRefusedBeforeItIsRead) {
  TempDir dir;
  const auto path = dir.path() / "t10k-images-idx3-ubyte";
  write_raw(path, idx_bytes({10, 10, 10}, iota_bytes(1000)));

  EXPECT_EQ(read_idx(path, 5, 5000).data.size(), 1000u);  // just fits
  EXPECT_THAT(
      [&] { read_idx(path, 5, 4999); },
      ThrowsMessage<TooLargeError>(
          AllOf(HasSubstr(path.string()), HasSubstr("promise 1000 elements"),
                HasSubstr("need 5000 bytes in memory (5 bytes each), more than the 4999 bytes"))));
}

TEST(ReadIdx, DimensionsOverflowingSixtyFourBitsAreRejected) {
  TempDir dir;
  const auto path = dir.path() / "overflow";
  write_raw(path, idx_bytes({0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF}, {}));

  EXPECT_THAT(read_idx_error(path),
              AllOf(HasSubstr(path.string()),
                    HasSubstr("dimensions 4294967295x4294967295x4294967295 overflow")));
}

TEST(ReadIdx, TrailingBytesNameFileAndCounts) {
  TempDir dir;
  const auto path = dir.path() / "t10k-labels-idx1-ubyte";
  Bytes file = idx_bytes({12}, iota_bytes(12));
  file.insert(file.end(), {0xde, 0xad, 0xbe});
  write_raw(path, file);

  EXPECT_THAT(read_idx_error(path),
              AllOf(HasSubstr(path.string()),
                    HasSubstr("3 trailing bytes after the 12 bytes of data the header promises")));
}

TEST(ReadIdx, TrailingBytesInsideGzipAreRejected) {
  TempDir dir;
  const auto path = dir.path() / "labels.gz";
  Bytes file = idx_bytes({4}, iota_bytes(4));
  file.push_back(0);
  write_gzip(path, file);

  EXPECT_THAT(read_idx_error(path),
              AllOf(HasSubstr(path.string()), HasSubstr("1 trailing bytes after the 4 bytes")));
}

TEST(ReadIdx, CutGzipStreamIsReportedAsCorrupt) {
  TempDir dir;
  const auto whole = dir.path() / "whole.gz";
  const auto cut = dir.path() / "cut.gz";
  write_gzip(whole, idx_bytes({20, 28, 28}, iota_bytes(20 * 28 * 28)));
  Bytes compressed = read_all(whole);
  compressed.resize(compressed.size() / 2);
  write_raw(cut, compressed);

  EXPECT_THAT(read_idx_error(cut),
              AllOf(HasSubstr(cut.string()), HasSubstr("corrupt gzip stream")));
}

TEST(ReadIdx, DirectoryIsRejected) {
  TempDir dir;
  EXPECT_THAT(read_idx_error(dir.path()),
              AllOf(HasSubstr(dir.path().string()), HasSubstr("is a directory")));
}

}  // namespace
}  // namespace dtrain
