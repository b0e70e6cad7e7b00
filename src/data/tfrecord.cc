// TfRecordReader reads each record's header, data and footer through InputFile and checks both
// masked CRCs; TfRecordWriter frames records and, when compressing, deflates the whole stream into
// an AtomicFileWriter.
#include "data/tfrecord.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <vector>

#include "base/atomic_file.h"
#include "base/error.h"
#include "data/tfrecord_format.h"

namespace dtrain {
namespace {

constexpr uint64_t kFirstChunkBytes = uint64_t{1} << 20;

}  // namespace

TfRecordReader::TfRecordReader(const std::filesystem::path& path, Compression compression)
    : file_(path, compression_of(path, compression)) {}

void TfRecordReader::fail_truncated(const std::string& place) const {
  throw DataError(fmt::format("{}: truncated {}: the file ends at byte {}, inside it",
                              file_.path().string(), place, file_.offset()));
}

void TfRecordReader::read_data(uint64_t length, const std::string& place, std::string& record) {
  // The buffer grows with the data that arrives, doubling from kFirstChunkBytes, so that a length
  // that passed its CRC but is not backed by the file costs at most twice what the file holds.
  record.clear();
  const std::string what = place + ": its data";
  size_t held = 0;
  while (held < length) {
    const size_t target = static_cast<size_t>(
        std::min<uint64_t>(length, std::max<uint64_t>(kFirstChunkBytes, 2 * held)));
    record.resize(target);
    const auto chunk = std::as_writable_bytes(std::span(record.data() + held, target - held));
    if (!file_.read_exactly(chunk, what.c_str())) fail_truncated(place);
    held = target;
  }
}

bool TfRecordReader::next(std::string& record) {
  const uint64_t start = file_.offset();
  const uint64_t index = records_read_;
  const std::string place = fmt::format("record {} (starting at byte {})", index, start);
  std::array<std::byte, tfrecord::kHeaderBytes> header{};
  if (!file_.read_exactly(header, (place + ": its header").c_str())) return false;

  const uint32_t length_crc = tfrecord::get_u32(header.data() + tfrecord::kLengthBytes);
  const uint32_t expected_length_crc =
      tfrecord::masked_crc32c(std::span(header.data(), tfrecord::kLengthBytes));
  if (length_crc != expected_length_crc) {
    throw DataError(fmt::format(
        "{}: {}: the CRC of its length does not match (stored 0x{:08x}, computed 0x{:08x}); the "
        "file is corrupt or not a TFRecord file",
        file_.path().string(), place, length_crc, expected_length_crc));
  }
  const uint64_t length = tfrecord::get_u64(header.data());
  if (length > tfrecord::kMaxRecordBytes) {
    throw DataError(fmt::format("{}: {}: length {} is over the limit of {} bytes",
                                file_.path().string(), place, length, tfrecord::kMaxRecordBytes));
  }

  read_data(length, place, record);
  std::array<std::byte, tfrecord::kFooterBytes> footer{};
  const std::string footer_what = place + ": its data CRC";
  if (!file_.read_exactly(footer, footer_what.c_str())) fail_truncated(place);
  const auto data = std::as_bytes(std::span(record.data(), record.size()));
  const uint32_t data_crc = tfrecord::get_u32(footer.data());
  const uint32_t expected_data_crc = tfrecord::masked_crc32c(data);
  if (data_crc != expected_data_crc) {
    throw DataError(fmt::format(
        "{}: {}: the CRC of its {} bytes of data does not match (stored 0x{:08x}, computed "
        "0x{:08x}); the file is corrupt",
        file_.path().string(), place, length, data_crc, expected_data_crc));
  }
  record_offset_ = start;
  ++records_read_;
  return true;
}

struct TfRecordWriter::Impl {
  AtomicFileWriter out;
  bool deflating = false;
  z_stream z{};
  std::vector<unsigned char> buffer;  // deflate's output, appended to out when full
  uint64_t file_bytes = 0;

  explicit Impl(const std::filesystem::path& path) : out(path, kSharedFileMode) {}
  ~Impl() {
    if (deflating) deflateEnd(&z);
  }

  void emit(const unsigned char* bytes, size_t n) {
    out.append(std::as_bytes(std::span(bytes, n)));
    file_bytes += n;
  }

  // Runs deflate over z's input with `flush`, appending what it produces; with Z_FINISH, until
  // the stream is complete.
  void pump(int flush) {
    for (;;) {
      z.next_out = buffer.data();
      z.avail_out = static_cast<uInt>(buffer.size());
      const int status = deflate(&z, flush);
      emit(buffer.data(), buffer.size() - z.avail_out);
      if (status == Z_STREAM_END) return;
      if (flush != Z_FINISH && z.avail_in == 0 && z.avail_out > 0) return;
    }
  }

  void put(std::span<const std::byte> bytes) {
    if (!deflating) {
      out.append(bytes);
      file_bytes += bytes.size();
      return;
    }
    z.next_in = reinterpret_cast<unsigned char*>(const_cast<std::byte*>(bytes.data()));
    z.avail_in = static_cast<uInt>(bytes.size());
    pump(Z_NO_FLUSH);
  }
};

TfRecordWriter::TfRecordWriter(const std::filesystem::path& path, Compression compression)
    : impl_(std::make_unique<Impl>(path)) {
  if (compression == Compression::kNone) return;
  // 16 + MAX_WBITS: a gzip wrapper, as TensorFlow's GZIP option writes; MAX_WBITS: zlib's.
  const int window_bits = compression == Compression::kGzip ? 16 + MAX_WBITS : MAX_WBITS;
  if (deflateInit2(&impl_->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, window_bits, 8,
                   Z_DEFAULT_STRATEGY) != Z_OK) {
    throw IoError(fmt::format("{}: cannot start zlib: out of memory", path.string()));
  }
  impl_->deflating = true;
  impl_->buffer.resize(size_t{1} << 18);
}

TfRecordWriter::~TfRecordWriter() = default;

void TfRecordWriter::write(std::string_view record) {
  const auto data = std::as_bytes(std::span(record.data(), record.size()));
  impl_->put(tfrecord::record_header(record.size()));
  impl_->put(data);
  impl_->put(tfrecord::record_footer(data));
  ++records_written_;
}

void TfRecordWriter::commit() {
  if (impl_->deflating) {
    impl_->z.next_in = nullptr;
    impl_->z.avail_in = 0;
    impl_->pump(Z_FINISH);
  }
  impl_->out.commit();
}

uint64_t TfRecordWriter::file_bytes() const { return impl_->file_bytes; }

}  // namespace dtrain
