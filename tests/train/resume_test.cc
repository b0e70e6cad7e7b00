// Training stopped at step S and restarted from --train_dir continues exactly: 100 steps straight
// equal 50 steps, a restart, and 50 more, bit for bit (same seed, one thread).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "ckpt/checkpoint_manager.h"
#include "plan/recipes.h"
#include "support/process.h"
#include "support/temp_dir.h"
#include "train/trainer.h"

namespace dtrain {
namespace {

TrainConfig config_for(const std::filesystem::path& train_dir, int64_t steps) {
  // Adam and a moving average, so the optimizer slots and the shadow weights must survive too.
  TrainConfig c = recipe_for("mlp");
  c.model.hidden_units = 64;
  c.moving_average_decay = 0.99f;
  c.lr_decay_rate = 0.9f;
  c.lr_decay_steps = 30;
  c.train_steps = steps;
  c.batch_size = 50;
  c.data_dir = testing::mnist_dir();
  c.train_dir = train_dir;
  c.log_every = 0;
  return c;
}

Checkpoint newest(const std::filesystem::path& dir) {
  auto restored = CheckpointManager(dir).restore_latest();
  EXPECT_TRUE(restored.checkpoint.has_value());
  return std::move(*restored.checkpoint);
}

TEST(ResumeTest, HundredStepsEqualFiftyThenRestartThenFifty) {
  testing::TempDir straight, resumed;
  std::ostringstream log;
  train_local(config_for(straight.path(), 100), log);
  TrainResult first_half = train_local(config_for(resumed.path(), 50), log);
  EXPECT_EQ(first_half.global_step, 50);
  TrainResult second_half = train_local(config_for(resumed.path(), 100), log);
  EXPECT_EQ(second_half.global_step, 100);
  EXPECT_EQ(second_half.steps_run, 50);
  EXPECT_THAT(log.str(), ::testing::HasSubstr("at global step 50"));

  const Checkpoint a = newest(straight.path()), b = newest(resumed.path());
  ASSERT_EQ(a.global_step, 100);
  ASSERT_EQ(b.global_step, 100);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  // hid_w, ..., hid_w/adam_m, ..., hid_w/ExponentialMovingAverage, ...: all must match bit for bit.
  EXPECT_EQ(a.tensors.size(), 4u * 4u);
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    EXPECT_EQ(a.tensors[i].name, b.tensors[i].name);
    EXPECT_EQ(a.tensors[i].values, b.tensors[i].values) << a.tensors[i].name;
  }
}

TEST(ResumeTest, RestartDiffersWithoutTheCheckpoint) {
  // The control: without the restore, the second run starts from scratch and ends elsewhere.
  testing::TempDir straight, fresh;
  std::ostringstream log;
  train_local(config_for(straight.path(), 100), log);
  train_local(config_for(fresh.path(), 50), log);
  const Checkpoint a = newest(straight.path()), b = newest(fresh.path());
  EXPECT_NE(a.tensors[0].values, b.tensors[0].values);
}

}  // namespace
}  // namespace dtrain
