// The training state's construction, its one update rule and its checkpoint views.
#include "train/training_state.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <string>

#include "base/error.h"
#include "ckpt/param_set_checkpoint.h"
#include "nn/init.h"
#include "nn/model_zoo.h"

namespace dtrain {

TrainingState::TrainingState(const TrainConfig& config)
    : model_(make_model(config.model)),
      params_(model_->param_specs()),
      grads_(model_->param_specs()),
      optimizer_(make_optimizer(config.optimizer, model_->param_specs())),
      eval_moving_average_(config.eval_moving_average) {
  if (config.moving_average_decay > 0)
    moving_average_.emplace(config.moving_average_decay, params_);
}

const ParamSet& TrainingState::eval_params() const {
  return eval_moving_average_ && moving_average_ ? moving_average_->shadow() : params_;
}

void TrainingState::initialize(uint64_t seed) {
  initialize_params(params_, seed);
  if (moving_average_) moving_average_->reset(params_);
}

void TrainingState::apply(float lr, int64_t at_step, size_t begin, size_t end) {
  optimizer_->apply(params_, grads_, lr, at_step, begin, end);
  // TensorFlow's ExponentialMovingAverage counts the update just applied (num_updates = step+1).
  if (moving_average_) moving_average_->update(params_, at_step + 1, begin, end);
}

std::vector<TensorRef> TrainingState::tensors() const {
  std::vector<TensorRef> refs;
  append_tensor_refs(params_, refs);
  for (const ParamSet& slot : optimizer_->slots()) append_tensor_refs(slot, refs);
  if (moving_average_) append_tensor_refs(moving_average_->shadow(), refs);
  return refs;
}

Checkpoint TrainingState::snapshot(const TrainConfig& config) const {
  Checkpoint copy{.global_step = step,
                  .model = model_->name(),
                  .optimizer = optimizer_->name(),
                  .config = train_config_json(config),
                  .tensors = {}};
  for (const TensorRef& t : tensors())
    copy.tensors.push_back({t.name, t.shape, {t.values.begin(), t.values.end()}});
  return copy;
}

void TrainingState::restore(const Checkpoint& checkpoint) {
  load_tensors(checkpoint, params_);
  for (ParamSet& slot : optimizer_->slots()) load_tensors(checkpoint, slot);
  if (!moving_average_) return;
  ParamSet& shadow = moving_average_->shadow();
  if (shadow.count() > 0 && checkpoint.find(shadow.spec(0).name) != nullptr) {
    load_tensors(checkpoint, shadow);
  } else {
    moving_average_->reset(params_);
  }
}

void TrainingState::restore_parameters(const Checkpoint& checkpoint) {
  load_tensors(checkpoint, params_);
  if (moving_average_) moving_average_->reset(params_);
}

std::optional<int64_t> restore_newest(const CheckpointManager& checkpoints, TrainingState& state,
                                      std::string_view who, std::ostream& out) {
  const std::string prefix = who.empty() ? std::string() : fmt::format("{}: ", who);
  const CheckpointManager::RestoreResult restored = checkpoints.restore_latest();
  for (const std::string& skipped : restored.skipped) {
    fmt::print(out, "{}skipped checkpoint {}\n", prefix, skipped);
  }
  if (!restored.checkpoint) return std::nullopt;
  const Checkpoint& checkpoint = *restored.checkpoint;
  if (checkpoint.model != state.model().name()) {
    throw CheckpointError(
        fmt::format("{}: holds model '{}', but --model is '{}'; use another --train_dir",
                    restored.path.string(), checkpoint.model, state.model().name()));
  }
  state.restore(checkpoint);
  fmt::print(out, "{}restored {} at global step {}\n", prefix, restored.path.string(),
             checkpoint.global_step);
  return checkpoint.global_step;
}

}  // namespace dtrain
