// IDX reading: a byte source (raw file or gzip stream) feeds a parser that checks every field
// against what the file holds, so a bad download fails with figures, not a crash.
#include "data/idx.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include "base/checked_math.h"
#include "base/error.h"
#include "base/machine_memory.h"

namespace dtrain {
namespace {

constexpr uint8_t kUnsignedByteType = 0x08;
constexpr int kMaxDims = 4;
// Gzip data, whose length is unknown until read, grows in doubling chunks rather than being
// allocated from the header at once, so a corrupt header that promises terabytes fails on the short
// read instead of on the allocation.
constexpr size_t kFirstChunkBytes = size_t{1} << 20;
// Deflate's largest ratio: a 258-byte match coded in two bits (zlib's technical details). A gzip
// file of n bytes decodes to fewer than 1032·n, so a header that promises more is a lie told
// before a byte of the data is read.
constexpr int64_t kMaxDeflateRatio = 1032;

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& problem) {
  throw DataError(fmt::format("{}: {}", path.string(), problem));
}

// Sequential reader over a file's (decompressed) bytes.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Reads up to n bytes into out; returns how many, fewer than n only at the end of the input.
  virtual size_t read(uint8_t* out, size_t n) = 0;
  // How many bytes are left, when known without reading them: for a raw file, not a gzip stream.
  virtual std::optional<uint64_t> bytes_left() const = 0;
  // Fails, naming the file, if it cannot hold `promised` more bytes: a raw file by its size, a
  // gzip stream by the most its compressed size can decode to.
  virtual void require_at_least(uint64_t promised) const = 0;
};

class RawSource : public ByteSource {
 public:
  explicit RawSource(const std::filesystem::path& path) : path_(path) {
    std::error_code ec;
    size_ = std::filesystem::file_size(path, ec);
    if (ec) fail(path, fmt::format("cannot get its size: {}", ec.message()));
    file_ = std::fopen(path.c_str(), "rb");
    if (file_ == nullptr) fail(path, fmt::format("cannot open: {}", std::strerror(errno)));
  }
  ~RawSource() override { std::fclose(file_); }
  RawSource(const RawSource&) = delete;
  RawSource& operator=(const RawSource&) = delete;

  size_t read(uint8_t* out, size_t n) override {
    const size_t got = std::fread(out, 1, n, file_);
    if (got < n && std::ferror(file_)) {
      fail(path_, fmt::format("read failed: {}", std::strerror(errno)));
    }
    position_ += got;
    return got;
  }
  std::optional<uint64_t> bytes_left() const override {
    return size_ > position_ ? size_ - position_ : 0;
  }
  void require_at_least(uint64_t promised) const override {
    if (*bytes_left() < promised) {
      fail(path_, fmt::format("truncated: header promises {} bytes of data, file holds {}",
                              promised, *bytes_left()));
    }
  }

 private:
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
  uint64_t size_ = 0;
  uint64_t position_ = 0;
};

class GzipSource : public ByteSource {
 public:
  explicit GzipSource(const std::filesystem::path& path) : path_(path) {
    std::error_code ec;
    compressed_bytes_ = std::filesystem::file_size(path, ec);
    if (ec) fail(path, fmt::format("cannot get its size: {}", ec.message()));
    file_ = gzopen(path.c_str(), "rb");
    if (file_ == nullptr) fail(path, fmt::format("cannot open: {}", std::strerror(errno)));
    gzbuffer(file_, 1 << 18);  // zlib's 8 KiB default makes decompressing 47 MB measurably slower.
  }
  ~GzipSource() override { gzclose(file_); }
  GzipSource(const GzipSource&) = delete;
  GzipSource& operator=(const GzipSource&) = delete;

  size_t read(uint8_t* out, size_t n) override {
    size_t total = 0;
    while (total < n) {
      // gzread takes an unsigned length; ask for at most 1 GiB at a time.
      const unsigned ask = static_cast<unsigned>(std::min<size_t>(n - total, size_t{1} << 30));
      const int got = gzread(file_, out + total, ask);
      if (got < 0) fail_with_zlib_error();
      if (got == 0) break;
      total += static_cast<size_t>(got);
    }
    // gzread reports a stream cut short as end of input plus an error state; surface it.
    if (total < n) {
      int code = Z_OK;
      gzerror(file_, &code);
      if (code != Z_OK) fail_with_zlib_error();
    }
    return total;
  }
  std::optional<uint64_t> bytes_left() const override { return std::nullopt; }
  void require_at_least(uint64_t promised) const override {
    const int64_t most = saturating_mul(static_cast<int64_t>(compressed_bytes_), kMaxDeflateRatio);
    if (promised > static_cast<uint64_t>(most)) {
      fail(path_, fmt::format("truncated: header promises {} bytes of data, more than the {} a "
                              "gzip file of {} bytes can decode to",
                              promised, most, compressed_bytes_));
    }
  }

 private:
  [[noreturn]] void fail_with_zlib_error() {
    int code = Z_OK;
    const char* message = gzerror(file_, &code);
    fail(path_, fmt::format("corrupt gzip stream: {}", message));
  }

  std::filesystem::path path_;
  uint64_t compressed_bytes_ = 0;
  gzFile file_ = nullptr;
};

bool starts_with_gzip_magic(const std::filesystem::path& path) {
  RawSource raw(path);
  std::array<uint8_t, 2> magic{};
  return raw.read(magic.data(), magic.size()) == magic.size() && magic[0] == 0x1f &&
         magic[1] == 0x8b;
}

std::unique_ptr<ByteSource> open_source(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    fail(path, "no such file; run scripts/fetch_mnist.sh to download MNIST");
  }
  if (std::filesystem::is_directory(path, ec)) fail(path, "is a directory, expected an IDX file");
  if (starts_with_gzip_magic(path)) return std::make_unique<GzipSource>(path);
  return std::make_unique<RawSource>(path);
}

uint32_t big_endian_u32(const uint8_t* bytes) {
  return (uint32_t{bytes[0]} << 24) | (uint32_t{bytes[1]} << 16) | (uint32_t{bytes[2]} << 8) |
         uint32_t{bytes[3]};
}

std::string type_name(uint8_t type) {
  switch (type) {
    case 0x08:
      return "unsigned byte";
    case 0x09:
      return "signed byte";
    case 0x0B:
      return "int16";
    case 0x0C:
      return "int32";
    case 0x0D:
      return "float32";
    case 0x0E:
      return "float64";
    default:
      return "unknown";
  }
}

std::string dims_string(const std::vector<uint32_t>& dims) {
  return fmt::format("{}", fmt::join(dims, "x"));
}

// Parses the magic and the dimensions; leaves the source at the first data byte.
std::vector<uint32_t> read_header(ByteSource& source, const std::filesystem::path& path) {
  std::array<uint8_t, 4> magic{};
  const size_t magic_bytes = source.read(magic.data(), magic.size());
  if (magic_bytes < magic.size()) {
    fail(path,
         fmt::format("truncated header: the magic needs 4 bytes, file holds {}", magic_bytes));
  }
  if (magic[0] != 0 || magic[1] != 0) {
    fail(path, fmt::format("bad magic 0x{:08x}: its first two bytes must be 0 (not an IDX file?)",
                           big_endian_u32(magic.data())));
  }
  const uint8_t type = magic[2];
  if (type != kUnsignedByteType) {
    fail(path, fmt::format("unsupported element type 0x{:02x} ({}): only 0x08 (unsigned byte) is "
                           "supported",
                           type, type_name(type)));
  }
  const int ndims = magic[3];
  if (ndims < 1 || ndims > kMaxDims) {
    fail(path, fmt::format("bad number of dimensions {}: must be 1 to {}", ndims, kMaxDims));
  }
  std::array<uint8_t, 4 * kMaxDims> dim_bytes{};
  const size_t want = 4 * static_cast<size_t>(ndims);
  const size_t got = source.read(dim_bytes.data(), want);
  if (got < want) {
    fail(path, fmt::format("truncated header: {} dimensions need {} header bytes, file holds {}",
                           ndims, 4 + want, 4 + got));
  }
  std::vector<uint32_t> dims(ndims);
  for (int i = 0; i < ndims; ++i) dims[i] = big_endian_u32(dim_bytes.data() + 4 * i);
  return dims;
}

uint64_t element_count(const std::vector<uint32_t>& dims, const std::filesystem::path& path) {
  uint64_t count = 1;
  for (uint32_t dim : dims) {
    if (__builtin_mul_overflow(count, uint64_t{dim}, &count)) {
      fail(path, fmt::format("dimensions {} overflow a 64-bit element count", dims_string(dims)));
    }
  }
  return count;
}

std::vector<uint8_t> read_data(ByteSource& source, uint64_t expected,
                               const std::filesystem::path& path) {
  const std::optional<uint64_t> left = source.bytes_left();
  // A raw file's size vouches for the header, so its data is read in one piece; a gzip stream's
  // length is known only once it is read.
  const uint64_t first_chunk = left ? expected : kFirstChunkBytes;
  std::vector<uint8_t> data;
  size_t held = 0;
  while (held < expected) {
    const size_t target = static_cast<size_t>(
        std::min<uint64_t>(expected, std::max<uint64_t>(first_chunk, 2 * held)));
    data.resize(target);
    const size_t got = source.read(data.data() + held, target - held);
    held += got;
    if (held < target) {
      fail(path, fmt::format("truncated: header promises {} bytes of data, file holds {}", expected,
                             held));
    }
  }
  return data;
}

void expect_end(ByteSource& source, uint64_t data_bytes, const std::filesystem::path& path) {
  std::array<uint8_t, 1 << 16> scratch{};
  uint64_t trailing = 0;
  for (size_t got; (got = source.read(scratch.data(), scratch.size())) > 0;) trailing += got;
  if (trailing > 0) {
    fail(path, fmt::format("{} trailing bytes after the {} bytes of data the header promises",
                           trailing, data_bytes));
  }
}

}  // namespace

struct IdxFileReader::Impl {
  std::unique_ptr<ByteSource> source;
};

IdxFileReader::IdxFileReader(const std::filesystem::path& path)
    : path_(path), impl_(std::make_unique<Impl>()) {
  impl_->source = open_source(path);
  dims_ = read_header(*impl_->source, path);
  element_count_ = dtrain::element_count(dims_, path);
  impl_->source->require_at_least(element_count_);
}

IdxFileReader::~IdxFileReader() = default;

void IdxFileReader::read(std::span<uint8_t> out) {
  const size_t got = impl_->source->read(out.data(), out.size());
  elements_read_ += got;
  if (got < out.size()) {
    fail(path_, fmt::format("truncated: header promises {} bytes of data, file holds {}",
                            element_count_, elements_read_));
  }
}

void IdxFileReader::expect_end() { dtrain::expect_end(*impl_->source, element_count_, path_); }

IdxArray read_idx(const std::filesystem::path& path, int64_t held_bytes_per_element,
                  std::optional<uint64_t> memory_limit_bytes) {
  std::unique_ptr<ByteSource> source = open_source(path);
  IdxArray array;
  array.dims = read_header(*source, path);
  const uint64_t count = element_count(array.dims, path);
  // The file's own evidence first: a header that promises more than the file holds is a corrupt
  // file, whatever the machine; one that could be true is then weighed against memory.
  source->require_at_least(count);
  const AllocationLimit limit =
      memory_limit_bytes ? machine_allocation_limit(*memory_limit_bytes) : allocation_limit();
  const int64_t held = saturating_mul(
      static_cast<int64_t>(std::min<uint64_t>(count, kSaturatedSize)), held_bytes_per_element);
  if (static_cast<uint64_t>(held) > limit.bytes) {
    throw TooLargeError(fmt::format(
        "{}: header dims {} promise {} elements, which need {} in memory ({} bytes each), more "
        "than {}",
        path.string(), dims_string(array.dims), count, format_bytes(static_cast<uint64_t>(held)),
        held_bytes_per_element, limit.text));
  }
  array.data = read_data(*source, count, path);
  expect_end(*source, count, path);
  return array;
}

}  // namespace dtrain
