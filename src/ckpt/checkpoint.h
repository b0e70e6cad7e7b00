// Reading and writing one checkpoint file: named float32 tensors plus the training state needed to
// resume (global step, model, optimizer, config), in the safetensors layout of
// ckpt/checkpoint_format.h. Retention and picking the newest valid file live in
// ckpt/checkpoint_manager.h.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/tensor.h"

namespace dtrain {

// Everything in a checkpoint except the tensors.
struct CheckpointInfo {
  int64_t global_step = 0;
  std::string model;      // model name, e.g. "mnist_inference"
  std::string optimizer;  // e.g. "sgd"
  nlohmann::json config;  // free-form training config
};

// A tensor to be written, viewed where it lives (typically a slice of a ParamSet arena), so a large
// model is not copied before writing. REQUIRES: values.size() == num_elements(shape).
struct TensorRef {
  std::string name;
  Shape shape;
  std::span<const float> values;
};

// A tensor read back from a file; owns its values.
struct CheckpointTensor {
  std::string name;
  Shape shape;
  std::vector<float> values;
};

struct Checkpoint {
  int64_t global_step = 0;
  std::string model;
  std::string optimizer;
  nlohmann::json config;
  std::vector<CheckpointTensor> tensors;  // in file order

  // The tensor with this name, or nullptr.
  const CheckpointTensor* find(std::string_view name) const;
};

// Writes the checkpoint atomically: to "<path>.tmp-<pid>", fsynced, renamed over path, then the
// directory is fsynced. If anything fails, a file already at path is left as it was.
// REQUIRES: tensor names unique, non-empty and not "__metadata__"; each values.size() matches its
// shape; global_step >= 0. Violations throw CheckpointError; operating-system failures throw
// IoError. Both name path.
void write_checkpoint(const std::filesystem::path& path, const CheckpointInfo& info,
                      std::span<const TensorRef> tensors);
// The same, for a Checkpoint held in memory.
void write_checkpoint(const std::filesystem::path& path, const Checkpoint& ckpt);

// Reads and validates everything: the header length fits the file, the header is a JSON object,
// every tensor is F32 with a valid shape and data_offsets that match it, tensors are contiguous and
// cover the data section exactly, all metadata is present and well-formed, and the data checksum
// matches. Any problem, including a missing or unreadable file, throws CheckpointError with the
// message
// "<path>: <problem>".
Checkpoint read_checkpoint(const std::filesystem::path& path);

}  // namespace dtrain
