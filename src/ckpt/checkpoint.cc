// Checkpoint writer and validating reader. The writer checksums the tensors in place, builds the
// header and streams header and tensors through an AtomicFileWriter. The reader checks the whole
// header against the file size before it allocates anything, then reads each tensor straight into
// its vector.
#include "ckpt/checkpoint.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <limits>
#include <optional>
#include <set>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/json_depth.h"
#include "ckpt/checkpoint_format.h"

namespace dtrain {
namespace cf = ckpt_format;

namespace {

using OrderedJson = nlohmann::ordered_json;

// zlib's crc32 takes a 32-bit length; feed it in pieces.
uint32_t crc32_update(uint32_t crc, const void* data, size_t size) {
  constexpr size_t kMaxPiece = 1u << 30;
  const auto* bytes = static_cast<const Bytef*>(data);
  while (size > 0) {
    size_t piece = std::min(size, kMaxPiece);
    crc = static_cast<uint32_t>(::crc32(crc, bytes, static_cast<uInt>(piece)));
    bytes += piece;
    size -= piece;
  }
  return crc;
}

std::string checksum_hex(uint32_t crc) { return fmt::format("{:08x}", crc); }

std::array<std::byte, cf::kHeaderLengthBytes> encode_u64_le(uint64_t value) {
  std::array<std::byte, cf::kHeaderLengthBytes> out;
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::byte>(value >> (8 * i));
  return out;
}

uint64_t decode_u64_le(const std::array<std::byte, cf::kHeaderLengthBytes>& in) {
  uint64_t value = 0;
  for (size_t i = 0; i < in.size(); ++i) value |= static_cast<uint64_t>(in[i]) << (8 * i);
  return value;
}

// ---------------------------------------------------------------------------------------------
// Writing

void validate_for_write(const std::filesystem::path& path, const CheckpointInfo& info,
                        std::span<const TensorRef> tensors) {
  auto fail = [&](const std::string& problem) {
    throw CheckpointError(fmt::format("{}: cannot write checkpoint: {}", path.string(), problem));
  };
  if (info.global_step < 0) fail(fmt::format("global_step {} is negative", info.global_step));
  std::set<std::string_view> names;
  for (const TensorRef& t : tensors) {
    if (t.name.empty()) fail("a tensor has an empty name");
    if (t.name == cf::kMetadataKey) fail(fmt::format("tensor name '{}' is reserved", t.name));
    if (!names.insert(t.name).second) fail(fmt::format("tensor '{}' appears twice", t.name));
    if (std::any_of(t.shape.begin(), t.shape.end(), [](int64_t d) { return d < 0; })) {
      fail(fmt::format("tensor '{}' has a negative dimension in shape {}", t.name,
                       shape_string(t.shape)));
    }
    if (static_cast<int64_t>(t.values.size()) != num_elements(t.shape)) {
      fail(fmt::format("tensor '{}' has shape {} ({} values) but {} values were given", t.name,
                       shape_string(t.shape), num_elements(t.shape), t.values.size()));
    }
  }
}

// The header in safetensors form, tensors in the given order, padded with spaces so that the data
// section starts kDataAlignmentBytes-aligned.
std::string make_header(const CheckpointInfo& info, std::span<const TensorRef> tensors,
                        uint32_t crc) {
  OrderedJson header = OrderedJson::object();
  uint64_t offset = 0;
  for (const TensorRef& t : tensors) {
    uint64_t end = offset + t.values.size_bytes();
    header[t.name] = {{cf::kDtypeKey, cf::kDtypeF32},
                      {cf::kShapeKey, t.shape},
                      {cf::kDataOffsetsKey, {offset, end}}};
    offset = end;
  }
  header[std::string(cf::kMetadataKey)] = {
      {cf::kMetaFormat, cf::kFormatName},
      {cf::kMetaGlobalStep, std::to_string(info.global_step)},
      {cf::kMetaModel, info.model},
      {cf::kMetaOptimizer, info.optimizer},
      {cf::kMetaConfig, info.config.dump()},
      {cf::kMetaChecksum, checksum_hex(crc)},
  };
  std::string text = header.dump();
  size_t unaligned = (cf::kHeaderLengthBytes + text.size()) % cf::kDataAlignmentBytes;
  if (unaligned != 0) text.append(cf::kDataAlignmentBytes - unaligned, ' ');
  return text;
}

std::span<const std::byte> bytes_of(std::span<const float> values) { return std::as_bytes(values); }

// ---------------------------------------------------------------------------------------------
// Reading

// Every reader failure goes through here, so every message has the same "<path>: <problem>" form.
[[noreturn]] void fail_read(const std::filesystem::path& path, const std::string& problem) {
  throw CheckpointError(fmt::format("{}: {}", path.string(), problem));
}

class ReadFile {
 public:
  explicit ReadFile(const std::filesystem::path& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) fail_read(path_, fmt::format("cannot open: {}", std::strerror(errno)));
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
      int err = errno;
      ::close(fd_);
      fail_read(path_, fmt::format("cannot stat: {}", std::strerror(err)));
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd_);
      fail_read(path_, "not a regular file");
    }
    size_ = static_cast<uint64_t>(st.st_size);
  }
  ~ReadFile() { ::close(fd_); }
  ReadFile(const ReadFile&) = delete;
  ReadFile& operator=(const ReadFile&) = delete;

  uint64_t size() const { return size_; }

  // Reads exactly size bytes at the current position. `what` names them in the error.
  void read_exact(void* out, size_t size, std::string_view what) {
    auto* dst = static_cast<char*>(out);
    while (size > 0) {
      ssize_t n = ::read(fd_, dst, size);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail_read(path_, fmt::format("read of {} failed: {}", what, std::strerror(errno)));
      // The size was checked against fstat; a short read means the file shrank under us.
      if (n == 0) fail_read(path_, fmt::format("unexpected end of file while reading {}", what));
      dst += n;
      size -= static_cast<size_t>(n);
    }
  }

 private:
  const std::filesystem::path& path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// A tensor entry of the header, validated against the data section but not yet read.
struct TensorEntry {
  std::string name;
  Shape shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// Bytes of F32 data a shape needs, or nullopt if its non-zero dimensions alone need more than 2^64.
// Such a shape is refused even when a zero makes it empty, so that num_elements() of any shape
// read back cannot overflow, whatever the order of its dimensions.
std::optional<uint64_t> checked_f32_bytes(const Shape& shape) {
  uint64_t bytes = cf::kF32Bytes;
  bool empty = false;
  for (int64_t d : shape) {
    if (d == 0) {
      empty = true;
      continue;
    }
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes)) return std::nullopt;
  }
  return empty ? 0 : bytes;
}

TensorEntry parse_tensor_entry(const std::filesystem::path& path, const std::string& name,
                               const OrderedJson& entry, uint64_t data_bytes) {
  auto fail = [&](const std::string& problem) {
    fail_read(path, fmt::format("tensor '{}': {}", name, problem));
  };
  if (!entry.is_object()) fail("header entry is not a JSON object");
  auto dtype = entry.find(cf::kDtypeKey);
  auto shape = entry.find(cf::kShapeKey);
  auto offsets = entry.find(cf::kDataOffsetsKey);
  if (dtype == entry.end() || shape == entry.end() || offsets == entry.end()) {
    fail(fmt::format("header entry needs '{}', '{}' and '{}'", cf::kDtypeKey, cf::kShapeKey,
                     cf::kDataOffsetsKey));
  }
  if (!dtype->is_string()) fail("dtype is not a string");
  if (dtype->get_ref<const std::string&>() != cf::kDtypeF32) {
    fail(fmt::format("dtype is {}; only {} is supported", dtype->get_ref<const std::string&>(),
                     cf::kDtypeF32));
  }

  TensorEntry out;
  out.name = name;
  if (!shape->is_array()) fail("shape is not an array");
  for (const OrderedJson& d : *shape) {
    if (!d.is_number_unsigned() ||
        d.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail(fmt::format("shape {} is not a list of non-negative integers", shape->dump()));
    }
    out.shape.push_back(d.get<int64_t>());
  }

  if (!offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
      !(*offsets)[1].is_number_unsigned()) {
    fail(fmt::format("data_offsets {} is not a pair of non-negative integers", offsets->dump()));
  }
  out.begin = (*offsets)[0].get<uint64_t>();
  out.end = (*offsets)[1].get<uint64_t>();
  if (out.begin > out.end || out.end > data_bytes) {
    fail(fmt::format("data_offsets [{}, {}] lie outside the data section of {} bytes", out.begin,
                     out.end, data_bytes));
  }
  std::optional<uint64_t> bytes = checked_f32_bytes(out.shape);
  if (!bytes) {
    fail(fmt::format("shape {} overflows: its non-zero dimensions need more than 2^64 bytes",
                     shape_string(out.shape)));
  }
  if (*bytes != out.end - out.begin) {
    fail(fmt::format("shape {} needs {} bytes of F32 but data_offsets [{}, {}] hold {}",
                     shape_string(out.shape), *bytes, out.begin, out.end, out.end - out.begin));
  }
  return out;
}

// Sorts entries into file order and checks they tile the data section: no gap, no overlap, no tail.
// Safetensors forbids holes, and a tiling is what makes one checksum cover every tensor.
void order_and_check_tiling(const std::filesystem::path& path, std::vector<TensorEntry>& entries,
                            uint64_t data_bytes) {
  // Stable, so that zero-size tensors sharing an offset keep their header order.
  std::stable_sort(entries.begin(), entries.end(),
                   [](const TensorEntry& a, const TensorEntry& b) { return a.begin < b.begin; });
  uint64_t expected = 0;
  const TensorEntry* previous = nullptr;
  for (const TensorEntry& e : entries) {
    if (e.begin != expected) {
      std::string before = previous ? fmt::format("the previous tensor '{}' ends at byte {}",
                                                  previous->name, expected)
                                    : std::string("the data section starts at byte 0");
      fail_read(path, fmt::format("tensor '{}' starts at byte {} but {} ({})", e.name, e.begin,
                                  before, e.begin < expected ? "tensors overlap" : "a gap"));
    }
    expected = e.end;
    previous = &e;
  }
  if (expected != data_bytes) {
    fail_read(path, fmt::format("tensors cover {} bytes but the data section holds {} "
                                "(the file has trailing bytes or is not a checkpoint)",
                                expected, data_bytes));
  }
}

const std::string& metadata_string(const std::filesystem::path& path, const OrderedJson& metadata,
                                   std::string_view key) {
  auto it = metadata.find(key);
  if (it == metadata.end()) fail_read(path, fmt::format("metadata lacks '{}'", key));
  if (!it->is_string()) fail_read(path, fmt::format("metadata '{}' is not a string", key));
  return it->get_ref<const std::string&>();
}

struct ParsedMetadata {
  CheckpointInfo info;
  uint32_t checksum = 0;
};

ParsedMetadata parse_metadata(const std::filesystem::path& path, const OrderedJson& header) {
  auto it = header.find(cf::kMetadataKey);
  if (it == header.end()) {
    fail_read(path, fmt::format("header has no '{}' (not a dtrain checkpoint)", cf::kMetadataKey));
  }
  if (!it->is_object()) fail_read(path, fmt::format("'{}' is not an object", cf::kMetadataKey));
  const OrderedJson& metadata = *it;

  const std::string& format = metadata_string(path, metadata, cf::kMetaFormat);
  if (format != cf::kFormatName) {
    fail_read(path, fmt::format("format is '{}', expected '{}'", format, cf::kFormatName));
  }

  ParsedMetadata out;
  const std::string& step = metadata_string(path, metadata, cf::kMetaGlobalStep);
  auto [step_end, step_err] =
      std::from_chars(step.data(), step.data() + step.size(), out.info.global_step);
  if (step.empty() || step_err != std::errc() || step_end != step.data() + step.size() ||
      out.info.global_step < 0) {
    fail_read(path, fmt::format("global_step '{}' is not a non-negative integer", step));
  }

  out.info.model = metadata_string(path, metadata, cf::kMetaModel);
  out.info.optimizer = metadata_string(path, metadata, cf::kMetaOptimizer);

  const std::string& config = metadata_string(path, metadata, cf::kMetaConfig);
  if (const std::optional<size_t> at = find_json_nesting_beyond(config, kMaxJsonNesting)) {
    fail_read(path, fmt::format("metadata 'config' nests deeper than {} levels (at byte {})",
                                kMaxJsonNesting, *at));
  }
  out.info.config = nlohmann::json::parse(config, nullptr, /*allow_exceptions=*/false);
  if (out.info.config.is_discarded()) fail_read(path, "metadata 'config' is not valid JSON");

  const std::string& checksum = metadata_string(path, metadata, cf::kMetaChecksum);
  auto [sum_end, sum_err] =
      std::from_chars(checksum.data(), checksum.data() + checksum.size(), out.checksum, 16);
  if (checksum.size() != cf::kChecksumHexDigits || sum_err != std::errc() ||
      sum_end != checksum.data() + checksum.size()) {
    fail_read(path,
              fmt::format("checksum '{}' is not {} hex digits", checksum, cf::kChecksumHexDigits));
  }
  return out;
}

OrderedJson read_header(const std::filesystem::path& path, ReadFile& file, uint64_t* data_bytes) {
  if (file.size() < cf::kHeaderLengthBytes) {
    fail_read(path, fmt::format("file is {} bytes, too short to hold the {}-byte header length",
                                file.size(), cf::kHeaderLengthBytes));
  }
  std::array<std::byte, cf::kHeaderLengthBytes> length_bytes;
  file.read_exact(length_bytes.data(), length_bytes.size(), "the header length");
  uint64_t header_bytes = decode_u64_le(length_bytes);
  uint64_t rest = file.size() - cf::kHeaderLengthBytes;
  if (header_bytes > rest) {
    fail_read(path, fmt::format("header length {} exceeds the {} bytes that follow it (truncated?)",
                                header_bytes, rest));
  }
  if (header_bytes > cf::kMaxHeaderBytes) {
    fail_read(path, fmt::format("header length {} exceeds the limit of {} bytes", header_bytes,
                                cf::kMaxHeaderBytes));
  }
  std::string text(header_bytes, '\0');
  file.read_exact(text.data(), text.size(), "the header");
  *data_bytes = rest - header_bytes;

  // Before parsing: every later copy and message of a value recurses once per level.
  if (const std::optional<size_t> at = find_json_nesting_beyond(text, kMaxJsonNesting)) {
    fail_read(path,
              fmt::format("header nests deeper than {} levels (at byte {})", kMaxJsonNesting, *at));
  }
  OrderedJson header = OrderedJson::parse(text, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) fail_read(path, "header is not valid JSON");
  if (!header.is_object()) fail_read(path, "header is not a JSON object");
  return header;
}

}  // namespace

const CheckpointTensor* Checkpoint::find(std::string_view name) const {
  for (const CheckpointTensor& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

void write_checkpoint(const std::filesystem::path& path, const CheckpointInfo& info,
                      std::span<const TensorRef> tensors) {
  validate_for_write(path, info, tensors);
  // The checksum goes in the header, which precedes the data: one read-only pass over the tensors
  // before writing, instead of patching the header afterwards.
  uint32_t crc = static_cast<uint32_t>(::crc32(0, nullptr, 0));
  for (const TensorRef& t : tensors)
    crc = crc32_update(crc, t.values.data(), t.values.size_bytes());
  std::string header = make_header(info, tensors, crc);

  AtomicFileWriter file(path);
  file.append(encode_u64_le(header.size()));
  file.append(header);
  for (const TensorRef& t : tensors) file.append(bytes_of(t.values));
  file.commit();
}

void write_checkpoint(const std::filesystem::path& path, const Checkpoint& ckpt) {
  std::vector<TensorRef> refs;
  refs.reserve(ckpt.tensors.size());
  for (const CheckpointTensor& t : ckpt.tensors) refs.push_back({t.name, t.shape, t.values});
  CheckpointInfo info{ckpt.global_step, ckpt.model, ckpt.optimizer, ckpt.config};
  write_checkpoint(path, info, refs);
}

Checkpoint read_checkpoint(const std::filesystem::path& path) {
  ReadFile file(path);
  uint64_t data_bytes = 0;
  OrderedJson header = read_header(path, file, &data_bytes);
  ParsedMetadata metadata = parse_metadata(path, header);

  std::vector<TensorEntry> entries;
  for (const auto& [name, entry] : header.items()) {
    if (name == cf::kMetadataKey) continue;
    entries.push_back(parse_tensor_entry(path, name, entry, data_bytes));
  }
  order_and_check_tiling(path, entries, data_bytes);

  // Every size below was checked against the file size, so these allocations are bounded by it.
  Checkpoint ckpt;
  ckpt.global_step = metadata.info.global_step;
  ckpt.model = std::move(metadata.info.model);
  ckpt.optimizer = std::move(metadata.info.optimizer);
  ckpt.config = std::move(metadata.info.config);
  ckpt.tensors.reserve(entries.size());
  uint32_t crc = static_cast<uint32_t>(::crc32(0, nullptr, 0));
  for (TensorEntry& e : entries) {
    CheckpointTensor& t = ckpt.tensors.emplace_back();
    t.name = std::move(e.name);
    t.shape = std::move(e.shape);
    t.values.resize((e.end - e.begin) / cf::kF32Bytes);
    file.read_exact(t.values.data(), e.end - e.begin, fmt::format("tensor '{}'", t.name));
    crc = crc32_update(crc, t.values.data(), e.end - e.begin);
  }
  if (crc != metadata.checksum) {
    fail_read(path, fmt::format("checksum mismatch: the header says {} but the data hash to {} "
                                "(the data section is corrupt)",
                                checksum_hex(metadata.checksum), checksum_hex(crc)));
  }
  return ckpt;
}

}  // namespace dtrain
