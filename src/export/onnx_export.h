// An OnnxGraph encoded as an ONNX model file (IR version 8, opset 13), with dtrain's metadata.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "export/onnx_graph.h"

namespace dtrain {

constexpr int64_t kOnnxIrVersion = 8;  // ONNX 1.10 to 1.12 write it; every runtime since reads it
constexpr int64_t kOnnxOpset = 13;

struct OnnxModelInfo {
  std::string doc_string;
  // metadata_props, in order: e.g. {"global_step", "5000"}, {"input_scaling", "uint8 pixels /
  // 255"}.
  std::vector<std::pair<std::string, std::string>> metadata;
};

// The serialized ModelProto.
std::string encode_onnx_model(const OnnxGraph& graph, const OnnxModelInfo& info);

// Writes encode_onnx_model(...) to path atomically (base/atomic_file.h); throws IoError naming the
// file when it cannot be written.
void write_onnx_model(const std::filesystem::path& path, const OnnxGraph& graph,
                      const OnnxModelInfo& info);

}  // namespace dtrain
