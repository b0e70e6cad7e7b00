// Checkpoint file format: round trip, safetensors compatibility, and rejection of every kind of
// damage.
#include "ckpt/checkpoint.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "base/atomic_file.h"
#include "base/error.h"
#include "ckpt/checkpoint_format.h"
#include "support/temp_dir.h"

namespace dtrain {
namespace {

using ::testing::HasSubstr;
using testing::read_bytes;
using testing::TempDir;
using testing::write_bytes;
using OrderedJson = nlohmann::ordered_json;

Checkpoint sample_checkpoint() {
  Checkpoint ckpt;
  ckpt.global_step = 1234;
  ckpt.model = "mnist_inference";
  ckpt.optimizer = "sgd";
  ckpt.config = {{"learning_rate", 0.01}, {"batch_size", 100}, {"hidden", {128, 32}}};
  ckpt.tensors.push_back({"hid_w", {3, 2}, {1.0f, -2.5f, 3.25f, 0.0f, -0.0f, 1e-40f}});
  ckpt.tensors.push_back(
      {"hid_b",
       {2},
       {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}});
  ckpt.tensors.push_back({"empty", {0, 3}, {}});
  ckpt.tensors.push_back({"scale", {}, {42.0f}});
  ckpt.tensors.push_back({"sm_w/adam_m", {4}, {0.1f, 0.2f, 0.3f, 0.4f}});
  return ckpt;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  return a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<float> floats_at(const std::string& bytes, uint64_t begin, uint64_t end) {
  std::vector<float> out((end - begin) / 4);
  if (!out.empty()) std::memcpy(out.data(), bytes.data() + begin, end - begin);
  return out;
}

uint64_t header_length(const std::string& file) {
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<uint8_t>(file[i])) << (8 * i);
  return n;
}

std::string with_header_length(std::string file, uint64_t n) {
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>(n >> (8 * i));
  return file;
}

// A file with exactly this header and data section, for crafting damage the writer never produces.
std::string raw_file(const OrderedJson& header, const std::string& data) {
  std::string text = header.dump();
  return with_header_length(std::string(8, '\0'), text.size()) + text + data;
}

std::string crc_hex(const std::string& data) {
  uLong crc = crc32(0, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size()));
  return fmt::format("{:08x}", crc);
}

// ---------------------------------------------------------------------------------------------

TEST(CheckpointTest, RoundTripPreservesValuesBitExactShapesMetadataAndConfig) {
  TempDir dir;
  Checkpoint written = sample_checkpoint();
  write_checkpoint(dir / "a.safetensors", written);

  Checkpoint read = read_checkpoint(dir / "a.safetensors");

  EXPECT_EQ(read.global_step, 1234);
  EXPECT_EQ(read.model, "mnist_inference");
  EXPECT_EQ(read.optimizer, "sgd");
  EXPECT_EQ(read.config, written.config);
  ASSERT_EQ(read.tensors.size(), written.tensors.size());
  for (size_t i = 0; i < written.tensors.size(); ++i) {
    SCOPED_TRACE(written.tensors[i].name);
    EXPECT_EQ(read.tensors[i].name, written.tensors[i].name);
    EXPECT_EQ(read.tensors[i].shape, written.tensors[i].shape);
    EXPECT_TRUE(same_bits(read.tensors[i].values, written.tensors[i].values));
  }
}

TEST(CheckpointTest, FindReturnsTheNamedTensorOrNull) {
  Checkpoint ckpt = sample_checkpoint();
  ASSERT_NE(ckpt.find("hid_b"), nullptr);
  EXPECT_EQ(ckpt.find("hid_b")->shape, Shape{2});
  EXPECT_EQ(ckpt.find("nope"), nullptr);
}

TEST(CheckpointTest, EmptyCheckpointWithNullConfigRoundTrips) {
  TempDir dir;
  Checkpoint empty;
  write_checkpoint(dir / "e.safetensors", empty);
  Checkpoint read = read_checkpoint(dir / "e.safetensors");
  EXPECT_EQ(read.global_step, 0);
  EXPECT_TRUE(read.tensors.empty());
  EXPECT_TRUE(read.config.is_null());
}

TEST(CheckpointTest, FileIsValidSafetensorsWithAlignedContiguousF32Data) {
  TempDir dir;
  Checkpoint ckpt = sample_checkpoint();
  write_checkpoint(dir / "a.safetensors", ckpt);
  std::string file = read_bytes(dir / "a.safetensors");

  ASSERT_GE(file.size(), 8u);
  uint64_t n = header_length(file);
  ASSERT_LE(8 + n, file.size());
  EXPECT_EQ((8 + n) % 8, 0u) << "data section must start 8-byte aligned";
  std::string header_text = file.substr(8, n);
  EXPECT_EQ(header_text.front(), '{');
  OrderedJson header = OrderedJson::parse(header_text);  // trailing spaces are allowed
  std::string data = file.substr(8 + n);

  // Tensors appear in the header in file order, contiguous from offset 0, as little-endian F32.
  uint64_t expected_begin = 0;
  size_t index = 0;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    const CheckpointTensor& t = ckpt.tensors.at(index++);
    EXPECT_EQ(name, t.name);
    EXPECT_EQ(entry.at("dtype"), "F32");
    EXPECT_EQ(entry.at("shape").get<Shape>(), t.shape);
    uint64_t begin = entry.at("data_offsets").at(0);
    uint64_t end = entry.at("data_offsets").at(1);
    EXPECT_EQ(begin, expected_begin);
    EXPECT_EQ(end - begin, t.values.size() * 4);
    EXPECT_TRUE(same_bits(t.values, floats_at(data, begin, end)));
    expected_begin = end;
  }
  EXPECT_EQ(index, ckpt.tensors.size());
  EXPECT_EQ(expected_begin, data.size());

  const OrderedJson& meta = header.at("__metadata__");
  for (const auto& [key, value] : meta.items()) EXPECT_TRUE(value.is_string()) << key;
  EXPECT_EQ(meta.at("format"), "dtrain-checkpoint-1");
  EXPECT_EQ(meta.at("global_step"), "1234");
  EXPECT_EQ(meta.at("model"), "mnist_inference");
  EXPECT_EQ(meta.at("optimizer"), "sgd");
  EXPECT_EQ(nlohmann::json::parse(meta.at("config").get<std::string>()), ckpt.config);
  EXPECT_EQ(meta.at("checksum"), crc_hex(data));
}

TEST(CheckpointTest, ViewOverloadWritesLargeAndManySmallTensorsWithoutCopyingThemFirst) {
  TempDir dir;
  // Larger than the writer's buffer, so it goes straight to the file, between small buffered ones.
  std::vector<float> big(3'000'000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i) * 0.5f;
  std::vector<std::vector<float>> small(50);
  std::vector<TensorRef> refs;
  for (size_t i = 0; i < small.size(); ++i) {
    small[i].assign(i + 1, static_cast<float>(i));
    refs.push_back({fmt::format("b{}", i), {static_cast<int64_t>(i + 1)}, small[i]});
    if (i == 25) refs.push_back({"big", {1000, 3000}, big});
  }
  CheckpointInfo info{7, "mlp", "adam", {{"lr", 0.001}}};

  write_checkpoint(dir / "v.safetensors", info, refs);
  Checkpoint read = read_checkpoint(dir / "v.safetensors");

  ASSERT_EQ(read.tensors.size(), refs.size());
  for (size_t i = 0; i < refs.size(); ++i) {
    EXPECT_EQ(read.tensors[i].name, refs[i].name);
    EXPECT_TRUE(same_bits(read.tensors[i].values,
                          std::vector<float>(refs[i].values.begin(), refs[i].values.end())))
        << refs[i].name;
  }
  EXPECT_EQ(read.global_step, 7);
  EXPECT_EQ(read.optimizer, "adam");
}

TEST(CheckpointTest, WriterRejectsValuesThatDoNotMatchTheShape) {
  TempDir dir;
  std::vector<float> values(5);
  std::vector<TensorRef> refs{{"w", {2, 3}, values}};
  try {
    write_checkpoint(dir / "bad.safetensors", CheckpointInfo{}, refs);
    FAIL() << "expected CheckpointError";
  } catch (const CheckpointError& e) {
    EXPECT_THAT(e.what(), HasSubstr("bad.safetensors"));
    EXPECT_THAT(e.what(), HasSubstr("'w'"));
    EXPECT_THAT(e.what(), HasSubstr("[2, 3]"));
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "bad.safetensors"));
}

TEST(CheckpointTest, WriterRejectsDuplicateAndReservedNames) {
  TempDir dir;
  std::vector<float> one{1.0f};
  std::vector<TensorRef> duplicate{{"w", {1}, one}, {"w", {1}, one}};
  EXPECT_THROW(write_checkpoint(dir / "d.safetensors", CheckpointInfo{}, duplicate),
               CheckpointError);
  std::vector<TensorRef> reserved{{"__metadata__", {1}, one}};
  EXPECT_THROW(write_checkpoint(dir / "r.safetensors", CheckpointInfo{}, reserved),
               CheckpointError);
}

// Writes the sample checkpoint, flips the bits of mask in the byte at index, and expects reading it
// back to fail with a CheckpointError naming the file and the problem.
void expect_flip_rejected(size_t index, char mask, const std::string& problem) {
  TempDir dir;
  std::filesystem::path path = dir / "a.safetensors";
  write_checkpoint(path, sample_checkpoint());
  std::string file = read_bytes(path);
  ASSERT_LT(index, file.size());
  file[index] ^= mask;
  write_bytes(path, file);

  try {
    read_checkpoint(path);
    FAIL() << "expected CheckpointError";
  } catch (const CheckpointError& e) {
    EXPECT_THAT(e.what(), HasSubstr(path.string()));
    EXPECT_THAT(e.what(), HasSubstr(problem));
  }
}

TEST(CheckpointTest, FlippedDataByteFailsWithChecksumErrorNamingTheFile) {
  TempDir dir;
  write_checkpoint(dir / "a.safetensors", sample_checkpoint());
  const size_t size = read_bytes(dir / "a.safetensors").size();
  expect_flip_rejected(size - 3, 0x10, "checksum");  // inside "sm_w/adam_m", the last tensor
}

TEST(CheckpointTest, FlippedHeaderByteThatBreaksTheJsonIsRejected) {
  expect_flip_rejected(8, 0x01, "JSON");  // the opening '{'
}

// The checksum covers the data only, so a flip inside a metadata string (the model name) can read
// back; every other outcome must be a clean CheckpointError, never a crash (run under ASan/UBSan).
TEST(CheckpointTest, EveryFlippedHeaderByteIsRejectedOrHarmlessNeverACrash) {
  TempDir dir;
  std::filesystem::path path = dir / "a.safetensors";
  write_checkpoint(path, sample_checkpoint());
  const std::string original = read_bytes(path);
  uint64_t n = header_length(original);

  int rejected = 0;
  for (uint64_t i = 0; i < 8 + n; ++i) {
    for (uint8_t mask : {0x01, 0x80, 0xFF}) {
      std::string file = original;
      file[i] = static_cast<char>(file[i] ^ mask);
      write_bytes(path, file);
      try {
        read_checkpoint(path);
      } catch (const CheckpointError& e) {
        ++rejected;
        EXPECT_THAT(e.what(), HasSubstr(path.string()));
      }
    }
  }
  EXPECT_GT(rejected, 0);
}

TEST(CheckpointTest, TruncatedFileIsRejectedAtEveryLength) {
  TempDir dir;
  std::filesystem::path path = dir / "a.safetensors";
  write_checkpoint(path, sample_checkpoint());
  const std::string original = read_bytes(path);
  uint64_t n = header_length(original);
  const uint64_t data_begin = 8 + n;

  std::vector<uint64_t> lengths{
      0, 4, 8, 8 + n / 2, data_begin, data_begin + 5, original.size() - 1};
  for (uint64_t length = 0; length < original.size(); ++length) lengths.push_back(length);
  for (uint64_t length : lengths) {
    SCOPED_TRACE(fmt::format("truncated to {} of {} bytes", length, original.size()));
    write_bytes(path, original.substr(0, length));
    try {
      read_checkpoint(path);
      ADD_FAILURE() << "expected CheckpointError";
    } catch (const CheckpointError& e) {
      EXPECT_THAT(e.what(), HasSubstr(path.string()));
    }
  }
}

TEST(CheckpointTest, HeaderLengthLargerThanTheFileIsRejected) {
  TempDir dir;
  std::filesystem::path path = dir / "a.safetensors";
  write_checkpoint(path, sample_checkpoint());
  std::string file = read_bytes(path);

  for (uint64_t n : {static_cast<uint64_t>(file.size()), uint64_t{1} << 40,
                     std::numeric_limits<uint64_t>::max()}) {
    write_bytes(path, with_header_length(file, n));
    try {
      read_checkpoint(path);
      ADD_FAILURE() << "expected CheckpointError for length " << n;
    } catch (const CheckpointError& e) {
      EXPECT_THAT(e.what(), HasSubstr("header length"));
    }
  }
}

TEST(CheckpointTest, MissingFileIsACheckpointErrorNamingIt) {
  TempDir dir;
  try {
    read_checkpoint(dir / "absent.safetensors");
    FAIL() << "expected CheckpointError";
  } catch (const CheckpointError& e) {
    EXPECT_THAT(e.what(), HasSubstr("absent.safetensors"));
  }
}

TEST(CheckpointTest, DirectoryIsNotACheckpoint) {
  TempDir dir;
  EXPECT_THROW(read_checkpoint(dir.path()), CheckpointError);
}

// ---------------------------------------------------------------------------------------------
// Crafted headers: each case damages a valid header in one way the reader must catch.

OrderedJson valid_metadata(const std::string& data) {
  return {{"format", "dtrain-checkpoint-1"},
          {"global_step", "5"},
          {"model", "m"},
          {"optimizer", "sgd"},
          {"config", "{}"},
          {"checksum", crc_hex(data)}};
}

struct CraftedCase {
  std::string name;
  OrderedJson header;  // "__metadata__" is added unless the case sets it
  std::string data;    // the data section
  std::string expected_message;
};

void PrintTo(const CraftedCase& c, std::ostream* os) { *os << c.name; }

std::string floats(int count) { return std::string(static_cast<size_t>(count) * 4, '\x01'); }

std::vector<CraftedCase> crafted_cases() {
  std::vector<CraftedCase> cases;
  auto add = [&](std::string name, OrderedJson tensors, std::string data, std::string expected) {
    cases.push_back({std::move(name), std::move(tensors), std::move(data), std::move(expected)});
  };
  add("OffsetsBeyondTheDataSection",
      {{"w", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 16}}}}}, floats(2),
      "outside the data section");
  add("OffsetsReversed", {{"w", {{"dtype", "F32"}, {"shape", {0}}, {"data_offsets", {8, 0}}}}},
      floats(2), "outside the data section");
  add("OffsetsInconsistentWithShape",
      {{"w", {{"dtype", "F32"}, {"shape", {3}}, {"data_offsets", {0, 8}}}}}, floats(2),
      "shape [3] needs 12 bytes");
  add("ShapeWhoseElementCountOverflows",
      {{"w", {{"dtype", "F32"}, {"shape", {1ull << 62, 1ull << 62}}, {"data_offsets", {0, 8}}}}},
      floats(2), "more than 2^64");
  // Found by fuzz/checkpoint_fuzzer's checks: a zero dimension used to let the others pass
  // unchecked, and num_elements() of [2^40, 2^40, 0] overflows before it reaches the zero.
  add("EmptyShapeWhoseOtherDimensionsOverflow",
      {{"w", {{"dtype", "F32"}, {"shape", {1ull << 40, 1ull << 40, 0}}, {"data_offsets", {0, 0}}}}},
      "", "more than 2^64");
  add("NegativeDimension", {{"w", {{"dtype", "F32"}, {"shape", {-2}}, {"data_offsets", {0, 8}}}}},
      floats(2), "non-negative integers");
  add("OverlappingTensors",
      {{"a", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}},
       {"b", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {4, 12}}}}},
      floats(3), "overlap");
  add("GapBetweenTensors",
      {{"a", {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {0, 4}}}},
       {"b", {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {8, 12}}}}},
      floats(3), "gap");
  add("TrailingBytesAfterTheLastTensor",
      {{"a", {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {0, 4}}}}}, floats(2),
      "trailing bytes");
  add("DtypeOtherThanF32", {{"a", {{"dtype", "F16"}, {"shape", {2}}, {"data_offsets", {0, 4}}}}},
      floats(1), "only F32");
  add("TensorEntryMissingOffsets", {{"a", {{"dtype", "F32"}, {"shape", {1}}}}}, floats(1),
      "data_offsets");
  add("TensorEntryNotAnObject", {{"a", 3}}, "", "not a JSON object");
  add("HeaderNotAnObject", OrderedJson::array(), "", "not a JSON object");

  auto with_meta = [](OrderedJson metadata) {
    return OrderedJson{{"__metadata__", std::move(metadata)}};
  };
  OrderedJson meta = valid_metadata("");
  add("NoMetadata", {{"__metadata__", nullptr}}, "", "no '__metadata__'");
  OrderedJson no_checksum = meta;
  no_checksum.erase("checksum");
  add("MetadataWithoutChecksum", with_meta(no_checksum), "", "lacks 'checksum'");
  OrderedJson other_format = meta;
  other_format["format"] = "something-else";
  add("ForeignFormat", with_meta(other_format), "", "format is 'something-else'");
  OrderedJson bad_step = meta;
  bad_step["global_step"] = "12x";
  add("GlobalStepNotAnInteger", with_meta(bad_step), "", "global_step '12x'");
  OrderedJson numeric_step = meta;
  numeric_step["global_step"] = 12;
  add("MetadataValueNotAString", with_meta(numeric_step), "", "not a string");
  OrderedJson bad_config = meta;
  bad_config["config"] = "{not json";
  add("ConfigNotJson", with_meta(bad_config), "", "'config' is not valid JSON");
  OrderedJson bad_checksum = meta;
  bad_checksum["checksum"] = "xyz";
  add("ChecksumNotHex", with_meta(bad_checksum), "", "not 8 hex digits");
  return cases;
}

class CraftedHeaderTest : public ::testing::TestWithParam<CraftedCase> {};

TEST_P(CraftedHeaderTest, IsRejectedWithAMessageNamingFileAndProblem) {
  const CraftedCase& c = GetParam();
  OrderedJson header = c.header;
  if (header.is_object() && !header.contains("__metadata__")) {
    header["__metadata__"] = valid_metadata(c.data);
  }
  if (header.is_object() && header["__metadata__"].is_null()) header.erase("__metadata__");
  TempDir dir;
  std::filesystem::path path = dir / "crafted.safetensors";
  write_bytes(path, raw_file(header, c.data));

  try {
    read_checkpoint(path);
    FAIL() << "expected CheckpointError";
  } catch (const CheckpointError& e) {
    EXPECT_THAT(e.what(), HasSubstr(path.string()));
    EXPECT_THAT(e.what(), HasSubstr(c.expected_message));
  }
}

INSTANTIATE_TEST_SUITE_P(Damage, CraftedHeaderTest, ::testing::ValuesIn(crafted_cases()),
                         [](const auto& info) { return info.param.name; });

TEST(CheckpointTest, ReaderAcceptsTensorsListedOutOfOffsetOrderAndReturnsThemInFileOrder) {
  std::string data;
  float a[2] = {1.0f, 2.0f};
  float b[1] = {3.0f};
  data.append(reinterpret_cast<const char*>(a), sizeof a);
  data.append(reinterpret_cast<const char*>(b), sizeof b);
  OrderedJson header = {{"b", {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {8, 12}}}},
                        {"a", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}}};
  header["__metadata__"] = valid_metadata(data);
  TempDir dir;
  write_bytes(dir / "x.safetensors", raw_file(header, data));

  Checkpoint read = read_checkpoint(dir / "x.safetensors");

  ASSERT_EQ(read.tensors.size(), 2u);
  EXPECT_EQ(read.tensors[0].name, "a");
  EXPECT_EQ(read.tensors[0].values, (std::vector<float>{1.0f, 2.0f}));
  EXPECT_EQ(read.tensors[1].name, "b");
  EXPECT_EQ(read.global_step, 5);
}

// ---------------------------------------------------------------------------------------------
// Atomicity

TEST(CheckpointTest, FailedWriteLeavesTheExistingCheckpointIntactAndNamesThePath) {
  TempDir dir;
  std::filesystem::path path = dir / "model.safetensors";
  write_checkpoint(path, sample_checkpoint());
  const std::string before = read_bytes(path);
  // The writer cannot create a temporary file where directories stand at every name it tries.
  for (int attempt = 0; attempt < kAtomicTempAttempts; ++attempt)
    std::filesystem::create_directory(atomic_temp_path(path, attempt));

  Checkpoint newer = sample_checkpoint();
  newer.global_step = 9999;
  try {
    write_checkpoint(path, newer);
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_THAT(e.what(), HasSubstr(path.string()));
  }

  EXPECT_EQ(read_bytes(path), before);
  EXPECT_EQ(read_checkpoint(path).global_step, 1234);
}

TEST(AtomicFileWriterTest, AbandonedWriteRemovesItsTemporaryFileAndLeavesTheTargetAlone) {
  TempDir dir;
  std::filesystem::path path = dir / "f";
  write_bytes(path, "old");
  std::filesystem::path temp;
  {
    AtomicFileWriter writer(path);
    writer.append("new contents");
    temp = writer.temp_path();
    EXPECT_TRUE(std::filesystem::exists(temp));
  }
  EXPECT_EQ(read_bytes(path), "old");
  EXPECT_FALSE(std::filesystem::exists(temp));
}

TEST(AtomicFileWriterTest, CommitReplacesTheTargetWithEverythingAppended) {
  TempDir dir;
  std::filesystem::path path = dir / "f";
  write_bytes(path, "old");
  AtomicFileWriter writer(path);
  writer.append("new ");
  writer.append(std::string(5 << 20, 'x'));  // larger than the buffer
  writer.append(" end");
  writer.commit();
  EXPECT_EQ(read_bytes(path), "new " + std::string(5 << 20, 'x') + " end");
  EXPECT_FALSE(std::filesystem::exists(writer.temp_path()));
}

TEST(AtomicFileWriterTest, TempNamesAreRecognised) {
  std::string_view target;
  long pid = 0;
  EXPECT_TRUE(parse_atomic_temp_name("model.ckpt-5.safetensors.tmp-123-4", &target, &pid));
  EXPECT_EQ(target, "model.ckpt-5.safetensors");
  EXPECT_EQ(pid, 123);
  EXPECT_TRUE(parse_atomic_temp_name("checkpoint.tmp-77", &target, &pid));  // older writers'
  EXPECT_EQ(target, "checkpoint");
  EXPECT_EQ(pid, 77);
  EXPECT_FALSE(parse_atomic_temp_name("model.ckpt-5.safetensors", &target, &pid));
  EXPECT_FALSE(parse_atomic_temp_name("x.tmp-", &target, &pid));
  EXPECT_FALSE(parse_atomic_temp_name("x.tmp-12a", &target, &pid));
  EXPECT_FALSE(parse_atomic_temp_name("x.tmp-12-", &target, &pid));
}

// Writers of one path, in one process or several, each write a temporary file of their own: one
// never truncates another's, nor removes it.
TEST(AtomicFileWriterTest, TwoWritersOfOnePathNeverShareATemporaryFile) {
  TempDir dir;
  const std::filesystem::path path = dir / "f";
  AtomicFileWriter first(path);
  AtomicFileWriter second(path);
  EXPECT_NE(first.temp_path(), second.temp_path());
  first.append("first");
  second.append("second");
  first.commit();
  EXPECT_EQ(read_bytes(path), "first");
  second.commit();
  EXPECT_EQ(read_bytes(path), "second");
}

// A name that exists — here a symlink planted at the first name a writer tries — is never opened,
// so nothing is written through it.
TEST(AtomicFileWriterTest, AnExistingTemporaryNameIsNeverOpenedNorFollowed) {
  TempDir dir;
  const std::filesystem::path path = dir / "f";
  write_bytes(dir / "victim", "keep me");
  std::filesystem::create_symlink(dir / "victim", atomic_temp_path(path, 0));
  AtomicFileWriter writer(path);
  EXPECT_EQ(writer.temp_path(), atomic_temp_path(path, 1));
  writer.append("new");
  writer.commit();
  EXPECT_EQ(read_bytes(dir / "victim"), "keep me");
  EXPECT_EQ(read_bytes(path), "new");
  EXPECT_TRUE(std::filesystem::is_symlink(atomic_temp_path(path, 0))) << "not ours to remove";
}

}  // namespace
}  // namespace dtrain
