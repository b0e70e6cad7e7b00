// Reader for the IDX format in which MNIST ships (http://yann.lecun.com/exdb/mnist/): a 4-byte
// magic (0, 0, element type, number of dimensions), one big-endian uint32 per dimension, then the
// elements. Only unsigned-byte elements (type 0x08) are supported, which is all MNIST needs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <vector>

namespace dtrain {

// An IDX file's contents: dims as stored (outermost first) and the elements in row-major order.
// data.size() is the product of dims.
struct IdxArray {
  std::vector<uint32_t> dims;
  std::vector<uint8_t> data;
};

// Reads a raw or gzip-compressed IDX file; gzip is recognised by its magic bytes (1f 8b), not by
// the file name. Throws DataError naming the path and the problem, with expected and actual
// figures, for a missing file, a bad magic, an unsupported element type, 0 or more than 4
// dimensions, a truncated header or data (a gzip file whose header promises more than its size
// can decode to is truncated), trailing bytes after the data, or a corrupt gzip stream.
// held_bytes_per_element is what the caller will hold for each element: 1 for the bytes alone, 5
// for a caller that converts them to float32 features beside them. Throws TooLargeError, before
// allocating, when a header the file could honour promises elements that would need more than
// memory_limit_bytes, as a machine of that size (nullopt: what this process may allocate here,
// base/machine_memory.h: allocation_limit).
IdxArray read_idx(const std::filesystem::path& path, int64_t held_bytes_per_element = 1,
                  std::optional<uint64_t> memory_limit_bytes = std::nullopt);

// An IDX file read front to back without holding its data: the header is parsed and checked when
// it opens (the same checks as read_idx), then the elements come in order, as many at a time as
// the caller asks. A raw file whose size falls short of its header fails at open; a gzip stream,
// whose length is known only once read, fails at the read that runs out.
// Not thread-safe.
class IdxFileReader {
 public:
  // Throws DataError as read_idx does for a missing file or a bad header. The data need not fit
  // in memory: it is never held whole.
  explicit IdxFileReader(const std::filesystem::path& path);
  ~IdxFileReader();
  IdxFileReader(const IdxFileReader&) = delete;
  IdxFileReader& operator=(const IdxFileReader&) = delete;

  // Dims as stored, outermost first.
  const std::vector<uint32_t>& dims() const { return dims_; }
  // The product of dims: how many elements the file holds.
  uint64_t element_count() const { return element_count_; }
  // Elements read so far.
  uint64_t elements_read() const { return elements_read_; }
  const std::filesystem::path& path() const { return path_; }

  // Reads the next out.size() elements. Throws DataError ("truncated: header promises N bytes of
  // data, file holds M") if the file ends first, or for a read error or a corrupt gzip stream.
  // REQUIRES: elements_read() + out.size() <= element_count().
  void read(std::span<uint8_t> out);
  // Throws DataError if bytes follow the elements the header promises.
  // REQUIRES: elements_read() == element_count().
  void expect_end();

 private:
  struct Impl;
  std::filesystem::path path_;
  std::unique_ptr<Impl> impl_;
  std::vector<uint32_t> dims_;
  uint64_t element_count_ = 0;
  uint64_t elements_read_ = 0;
};

}  // namespace dtrain
