// Glue between ParamSet arenas and checkpoints: view parameters (or optimizer slots, which mirror
// their layout) as TensorRefs for writing, and copy restored tensors back into an arena.
#pragma once

#include <string_view>
#include <vector>

#include "ckpt/checkpoint.h"
#include "nn/param_set.h"

namespace dtrain {

// Appends one TensorRef per tensor of params, viewing its arena (no copy), named
// "<name><name_suffix>": "hid_w", or "hid_w/adam_m" for a slot set. The refs are valid while params
// lives and keeps its layout.
void append_tensor_refs(const ParamSet& params, std::vector<TensorRef>& refs,
                        std::string_view name_suffix = {});

// Copies every tensor of params from the tensor "<name><name_suffix>" of ckpt. All names and shapes
// are checked before anything is copied, so a mismatch leaves params untouched; it throws
// CheckpointError naming the tensor, e.g. "... tensor 'sm_w' has shape [10] but the model expects
// [784, 10]". Tensors of ckpt that params does not name are ignored.
void load_tensors(const Checkpoint& ckpt, ParamSet& params, std::string_view name_suffix = {});

}  // namespace dtrain
