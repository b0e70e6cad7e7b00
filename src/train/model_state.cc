// Checkpoint views of the training state.
#include "train/model_state.h"

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

}  // namespace dtrain
