// Checkpoint views of the training state.
#include "train/model_state.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <string>

#include "base/error.h"
#include "ckpt/param_set_checkpoint.h"

namespace dtrain {

std::vector<TensorRef> ModelState::tensors() const {
  std::vector<TensorRef> refs;
  append_tensor_refs(*params, refs);
  if (optimizer != nullptr) {
    for (const ParamSet& slot : optimizer->slots()) append_tensor_refs(slot, refs);
  }
  if (moving_average != nullptr) append_tensor_refs(moving_average->shadow(), refs);
  return refs;
}

void ModelState::restore(const Checkpoint& checkpoint) const {
  load_tensors(checkpoint, *params);
  if (optimizer != nullptr) {
    for (ParamSet& slot : optimizer->slots()) load_tensors(checkpoint, slot);
  }
  if (moving_average == nullptr) return;
  ParamSet& shadow = moving_average->shadow();
  if (shadow.count() > 0 && checkpoint.find(shadow.spec(0).name) != nullptr) {
    load_tensors(checkpoint, shadow);
  } else {
    moving_average->reset(*params);
  }
}

std::optional<int64_t> restore_newest(const CheckpointManager& checkpoints, const ModelState& state,
                                      std::string_view model, std::string_view who,
                                      std::ostream& out) {
  const std::string prefix = who.empty() ? std::string() : fmt::format("{}: ", who);
  const CheckpointManager::RestoreResult restored = checkpoints.restore_latest();
  for (const std::string& skipped : restored.skipped) {
    fmt::print(out, "{}skipped checkpoint {}\n", prefix, skipped);
  }
  if (!restored.checkpoint) return std::nullopt;
  const Checkpoint& checkpoint = *restored.checkpoint;
  if (checkpoint.model != model) {
    throw CheckpointError(
        fmt::format("{}: holds model '{}', but --model is '{}'; use another --train_dir",
                    restored.path.string(), checkpoint.model, model));
  }
  state.restore(checkpoint);
  fmt::print(out, "{}restored {} at global step {}\n", prefix, restored.path.string(),
             checkpoint.global_step);
  return checkpoint.global_step;
}

}  // namespace dtrain
