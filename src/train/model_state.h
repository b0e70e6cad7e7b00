// A model's training state as checkpoint tensors: the parameters, the optimizer slots and the
// moving average, saved and restored together so a resumed run continues exactly where it stopped.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string_view>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_manager.h"
#include "nn/param_set.h"
#include "optim/moving_average.h"
#include "optim/optimizer.h"

namespace dtrain {

struct ModelState {
  ParamSet* params = nullptr;
  Optimizer* optimizer = nullptr;           // may be null (evaluation)
  MovingAverage* moving_average = nullptr;  // may be null

  // Views of every tensor to save, parameters first.
  std::vector<TensorRef> tensors() const;
  // Copies the checkpoint's tensors into the state. Parameters and optimizer slots must all be
  // present with matching shapes (CheckpointError naming the tensor otherwise); a checkpoint
  // without a moving average restarts the average from the restored parameters.
  void restore(const Checkpoint& checkpoint) const;
};

// Restores `state` from the newest valid checkpoint `checkpoints` holds, telling `out` which ones
// it skipped and which it restored (each line opened by "<who>: " unless who is empty). Returns
// the checkpoint's global step, or nullopt when there is none. Throws CheckpointError if it holds
// a model other than `model`.
std::optional<int64_t> restore_newest(const CheckpointManager& checkpoints, const ModelState& state,
                                      std::string_view model, std::string_view who,
                                      std::ostream& out);

}  // namespace dtrain
