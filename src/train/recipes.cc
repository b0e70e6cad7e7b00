// Per-model default training settings, read from the model's spec: the built-in models carry the
// recipes of their tutorials in their JSON (src/nn/models/, docs/models.md says why each), a
// user's file may carry its own, and what neither names is Keras' default.
#include "train/recipes.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "base/error.h"
#include "nn/model_zoo.h"
#include "optim/optimizer.h"

namespace dtrain {

TrainConfig recipe_for(const std::string& model) {
  TrainConfig c;
  c.model.name = model;
  // The one read of the model's file in a run: every later use shares it through c.model.
  resolve_model(c.model);
  const TrainingDefaults& d = c.model.source->defaults;
  // Named here, or validation would blame an --optimizer flag the user never gave.
  if (d.optimizer && std::find(optimizer_names().begin(), optimizer_names().end(), *d.optimizer) ==
                         optimizer_names().end()) {
    throw UsageError(fmt::format("{}: dtrain defaults optimizer {}: unknown; choose one of {}",
                                 model, *d.optimizer, fmt::join(optimizer_names(), ", ")));
  }
  // Keras' Adam (lr 1e-3), no decay, the raw weights evaluated, 10 epochs.
  c.optimizer.name = d.optimizer.value_or("adam");
  c.learning_rate = d.learning_rate.value_or(0.001f);
  c.lr_decay_rate = d.lr_decay_rate.value_or(1.0f);
  c.moving_average_decay = d.moving_average_decay.value_or(0.0f);
  c.eval_moving_average = c.moving_average_decay > 0;
  c.epochs = d.epochs.value_or(10);
  return c;
}

}  // namespace dtrain
