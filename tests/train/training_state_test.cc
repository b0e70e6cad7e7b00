// TrainingState as a checkpoint sees it: the tensors it saves, a restore that gives every one of
// them back, a moving average restarted when the checkpoint has none, and restore_newest's lines.
#include "train/training_state.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "support/temp_dir.h"

namespace dtrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::TempDir;

// softmax (w, b) under Adam (two slots each) with a moving average: every kind of tensor.
TrainConfig adam_softmax_config() {
  TrainConfig c;
  c.model.name = "softmax";
  c.optimizer.name = "adam";
  c.moving_average_decay = 0.99f;
  return c;
}

std::vector<std::string> names_of(const std::vector<TensorRef>& tensors) {
  std::vector<std::string> names;
  for (const TensorRef& t : tensors) names.push_back(t.name);
  return names;
}

// Moves every value of the state away from the fresh one, so a restore has something to undo.
void train_a_little(TrainingState& state) {
  for (float& g : state.grads().flat()) g = 0.25f;
  for (int64_t step = 0; step < 3; ++step) state.apply(0.1f, step, 0, state.params().num_values());
}

Checkpoint checkpoint_of(const TrainingState& state, bool with_moving_average) {
  Checkpoint checkpoint;
  checkpoint.global_step = 3;
  checkpoint.model = state.model().name();
  for (const TensorRef& t : state.tensors()) {
    if (!with_moving_average && t.name.ends_with("/ExponentialMovingAverage")) continue;
    checkpoint.tensors.push_back({t.name, t.shape, {t.values.begin(), t.values.end()}});
  }
  return checkpoint;
}

TEST(TrainingState, SavesParametersThenOptimizerSlotsThenTheMovingAverageButNoGradients) {
  TrainingState state(adam_softmax_config());
  EXPECT_THAT(names_of(state.tensors()),
              ElementsAre("w", "b", "w/adam_m", "b/adam_m", "w/adam_v", "b/adam_v",
                          "w/ExponentialMovingAverage", "b/ExponentialMovingAverage"));
}

TEST(TrainingState, RestoreGivesBackEveryTensorItSaved) {
  TrainingState trained(adam_softmax_config());
  trained.initialize(7);
  train_a_little(trained);
  const Checkpoint checkpoint = checkpoint_of(trained, true);

  TrainingState fresh(adam_softmax_config());
  fresh.restore(checkpoint);
  const std::vector<TensorRef> restored = fresh.tensors();
  ASSERT_EQ(restored.size(), checkpoint.tensors.size());
  for (size_t i = 0; i < restored.size(); ++i) {
    EXPECT_EQ(std::vector<float>(restored[i].values.begin(), restored[i].values.end()),
              checkpoint.tensors[i].values)
        << restored[i].name;
  }
}

TEST(TrainingState, ACheckpointWithoutMovingAverageRestartsItFromTheRestoredParameters) {
  TrainingState trained(adam_softmax_config());
  trained.initialize(7);
  train_a_little(trained);
  TrainingState fresh(adam_softmax_config());
  fresh.restore(checkpoint_of(trained, false));
  const auto params = fresh.params().flat();
  const auto shadow = fresh.moving_average()->shadow().flat();
  EXPECT_EQ(std::vector<float>(shadow.begin(), shadow.end()),
            std::vector<float>(params.begin(), params.end()));
}

TEST(TrainingState, RestoreRefusesACheckpointThatLacksAnOptimizerSlot) {
  TrainingState trained(adam_softmax_config());
  Checkpoint checkpoint = checkpoint_of(trained, true);
  std::erase_if(checkpoint.tensors, [](const auto& t) { return t.name == "w/adam_v"; });
  TrainingState fresh(adam_softmax_config());
  EXPECT_THROW(fresh.restore(checkpoint), CheckpointError);
}

TEST(TrainingStateRestoreNewest, RestoresTheNewestAndSaysSo) {
  TempDir dir;
  TrainingState trained(adam_softmax_config());
  trained.initialize(7);
  train_a_little(trained);
  CheckpointManager checkpoints(dir.path());
  checkpoints.save({3, "softmax", "adam", {}}, trained.tensors());

  TrainingState fresh(adam_softmax_config());
  std::ostringstream out;
  EXPECT_EQ(restore_newest(checkpoints, fresh, "ps0", out), 3);
  EXPECT_THAT(out.str(), HasSubstr("ps0: restored "));
  EXPECT_THAT(out.str(), HasSubstr(" at global step 3\n"));
  const auto a = trained.params().flat();
  const auto b = fresh.params().flat();
  EXPECT_EQ(std::vector<float>(b.begin(), b.end()), std::vector<float>(a.begin(), a.end()));
}

TEST(TrainingStateRestoreNewest, RefusesAnotherModelsCheckpointNamingBoth) {
  TempDir dir;
  TrainingState mlp([] {
    TrainConfig c = adam_softmax_config();
    c.model.name = "mlp";
    return c;
  }());
  CheckpointManager checkpoints(dir.path());
  checkpoints.save({3, "mlp", "adam", {}}, mlp.tensors());
  TrainingState softmax(adam_softmax_config());
  std::ostringstream out;
  try {
    restore_newest(checkpoints, softmax, "", out);
    FAIL() << "restored an mlp checkpoint into softmax";
  } catch (const CheckpointError& e) {
    EXPECT_THAT(e.what(), HasSubstr("holds model 'mlp', but --model is 'softmax'"));
  }
}

}  // namespace
}  // namespace dtrain
