// ParamSet <-> checkpoint tensors.
#include "ckpt/param_set_checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "base/error.h"

namespace dtrain {

void append_tensor_refs(const ParamSet& params, std::vector<TensorRef>& refs,
                        std::string_view name_suffix) {
  for (size_t i = 0; i < params.count(); ++i) {
    const ParamSpec& spec = params.spec(i);
    refs.push_back({spec.name + std::string(name_suffix), spec.shape, params.values(i)});
  }
}

void load_tensors(const Checkpoint& ckpt, ParamSet& params, std::string_view name_suffix) {
  std::vector<const CheckpointTensor*> sources;
  sources.reserve(params.count());
  for (size_t i = 0; i < params.count(); ++i) {
    const ParamSpec& spec = params.spec(i);
    std::string name = spec.name + std::string(name_suffix);
    const CheckpointTensor* source = ckpt.find(name);
    if (source == nullptr) {
      throw CheckpointError(fmt::format(
          "checkpoint of model '{}' at step {} has no tensor '{}', which the model needs",
          ckpt.model, ckpt.global_step, name));
    }
    if (source->shape != spec.shape) {
      throw CheckpointError(fmt::format(
          "checkpoint of model '{}' at step {}: tensor '{}' has shape {} but the model expects {}",
          ckpt.model, ckpt.global_step, name, shape_string(source->shape),
          shape_string(spec.shape)));
    }
    sources.push_back(source);
  }
  for (size_t i = 0; i < params.count(); ++i) {
    std::copy(sources[i]->values.begin(), sources[i]->values.end(), params.values(i).begin());
  }
}

}  // namespace dtrain
