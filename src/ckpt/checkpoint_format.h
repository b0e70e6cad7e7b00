// The checkpoint file format and the checkpoint directory layout, shared by reader, writer and
// manager. A checkpoint is one file in the safetensors layout
// (https://github.com/huggingface/safetensors), so other tools can read it:
//
//   u64 little-endian N | N bytes of JSON header, space-padded | data section
//
// The header maps each tensor name to {"dtype": "F32", "shape": [...], "data_offsets": [begin,
// end]}, offsets relative to the start of the data section; tensors are contiguous, in header
// order, and cover the data section exactly (safetensors forbids holes). "__metadata__" maps string
// to string (safetensors allows only strings there): see the kMeta* keys below.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace dtrain::ckpt_format {

// Tensor data is written straight from memory as little-endian float32.
static_assert(std::endian::native == std::endian::little,
              "checkpoint I/O writes floats in host order, which must be little-endian");

inline constexpr size_t kHeaderLengthBytes = 8;  // the u64 N that opens the file
// The header is padded with spaces so the data section starts at a multiple of this, which lets a
// reader map the file and use the floats in place.
inline constexpr size_t kDataAlignmentBytes = 8;
// A corrupt length must not make a reader allocate gigabytes; safetensors uses the same limit.
inline constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

// Tensor entries.
inline constexpr std::string_view kDtypeKey = "dtype";
inline constexpr std::string_view kShapeKey = "shape";
inline constexpr std::string_view kDataOffsetsKey = "data_offsets";
inline constexpr std::string_view kDtypeF32 = "F32";
inline constexpr size_t kF32Bytes = 4;

// Metadata: all values are strings.
inline constexpr std::string_view kMetadataKey = "__metadata__";
inline constexpr std::string_view kMetaFormat = "format";           // == kFormatName
inline constexpr std::string_view kMetaGlobalStep = "global_step";  // decimal int64
inline constexpr std::string_view kMetaModel = "model";             // e.g. "mnist_inference"
inline constexpr std::string_view kMetaOptimizer = "optimizer";     // e.g. "sgd"
inline constexpr std::string_view kMetaConfig = "config";           // a JSON document, serialised
inline constexpr std::string_view kMetaChecksum = "checksum";       // see below
inline constexpr std::string_view kFormatName = "dtrain-checkpoint-1";
// zlib crc32 of the whole data section, as exactly 8 lowercase hex digits. It covers the data only:
// the header is guarded by JSON parsing and the structural checks of the reader.
inline constexpr size_t kChecksumHexDigits = 8;

// The checkpoint directory (ckpt/checkpoint_manager.h): "model.ckpt-<step>.safetensors" files, with
// <step> in decimal without leading zeros, and an index file "checkpoint" holding
// {"latest": "<file name>", "all": ["<file name>", ... oldest to newest]}.
inline constexpr std::string_view kFilePrefix = "model.ckpt-";
inline constexpr std::string_view kFileSuffix = ".safetensors";
inline constexpr std::string_view kIndexFileName = "checkpoint";
inline constexpr std::string_view kIndexLatestKey = "latest";
inline constexpr std::string_view kIndexAllKey = "all";

}  // namespace dtrain::ckpt_format
