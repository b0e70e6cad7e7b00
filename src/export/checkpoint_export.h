// A checkpoint's model with its weights as an ONNX file: what `dtrain export` writes, and Python's
// Model.export_onnx.
#pragma once

#include <filesystem>
#include <string>

#include "train/evaluate.h"

namespace dtrain {

// Writes loaded's model and weights to output (atomically), with metadata saying how its input
// was scaled and which weights these are. Returns the line that says what was written: "wrote
// m.onnx: model lenet at global step 600, input [batch,28,28,1] -> logits [batch,10], ...".
// Throws UsageError for a model ONNX export does not cover, IoError naming output.
std::string export_onnx(const CheckpointModel& loaded, const std::filesystem::path& output);

}  // namespace dtrain
