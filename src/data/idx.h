// Reader for the IDX format in which MNIST ships (http://yann.lecun.com/exdb/mnist/): a 4-byte
// magic (0, 0, element type, number of dimensions), one big-endian uint32 per dimension, then the
// elements. Only unsigned-byte elements (type 0x08) are supported, which is all MNIST needs.
#pragma once

#include <cstdint>
#include <filesystem>
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
// dimensions, a truncated header or data, trailing bytes after the data, or a corrupt gzip stream.
IdxArray read_idx(const std::filesystem::path& path);

}  // namespace dtrain
