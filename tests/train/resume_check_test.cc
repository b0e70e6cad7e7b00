// What a run finds in its --train_dir: the checkpoint's settings against this run's, and what each
// of the three modes (default, --resume, --overwrite) does with a difference.
#include "train/resume_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "base/error.h"
#include "ckpt/checkpoint_manager.h"
#include "plan/recipes.h"
#include "plan/recorded_settings.h"
#include "support/temp_dir.h"

namespace dtrain {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TrainConfig config_in(const std::filesystem::path& dir) {
  TrainConfig c = recipe_for("softmax");
  c.train_dir = dir;
  c.learning_rate = 0.5f;
  c.recorder = &settings_record();  // as the run plan sets it
  return c;
}

// A checkpoint as the run of `c` would have saved it at `step` (the values do not matter here).
void save_checkpoint_of(const TrainConfig& c, int64_t step) {
  const std::vector<float> w(4, 1.0f);
  const TensorRef tensor{"w", {2, 2}, w};
  CheckpointManager(c.train_dir)
      .save({step, c.model.name, c.optimizer.name, train_config_json(c)},
            std::span<const TensorRef>(&tensor, 1));
}

std::string settle(const TrainConfig& c, ResumeMode mode) {
  std::ostringstream out;
  settle_checkpoint(c, mode, "dtrain train", out);
  return out.str();
}

std::string refusal(const TrainConfig& c, ResumeMode mode) {
  try {
    settle(c, mode);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ResumeCheck, NothingIsFoundWithoutACheckpoint) {
  testing::TempDir dir;
  EXPECT_FALSE(find_checkpoint(config_in(dir.path())));
  EXPECT_EQ(settle(config_in(dir.path()), ResumeMode::kDefault), "");
}

TEST(ResumeCheck, TheSameSettingsResumeAndSaySoFirst) {
  testing::TempDir dir;
  const TrainConfig c = config_in(dir.path());
  save_checkpoint_of(c, 40);
  const auto found = find_checkpoint(c);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->step, 40);
  EXPECT_TRUE(found->changes.empty());
  EXPECT_THAT(settle(c, ResumeMode::kDefault),
              HasSubstr("(global step 40): resuming from it (--overwrite starts afresh)"));
}

TEST(ResumeCheck, ChangedSettingsAreRefusedByNameUnlessResumed) {
  testing::TempDir dir;
  TrainConfig c = config_in(dir.path());
  save_checkpoint_of(c, 40);
  c.learning_rate = 0.1f;
  c.batch_size = 7;
  c.test_data = "elsewhere.csv";  // where the test data are does not change training
  const std::string error = refusal(c, ResumeMode::kDefault);
  EXPECT_THAT(error, HasSubstr("holds a checkpoint of step 40 trained with other settings"));
  EXPECT_THAT(error, HasSubstr("--learning_rate 0.5 (now 0.1)"));
  EXPECT_THAT(error, HasSubstr("--batch_size 100 (now 7)"));
  EXPECT_THAT(error, Not(HasSubstr("--test_data")));
  EXPECT_THAT(error, HasSubstr("pass --resume"));
  const std::string resumed = settle(c, ResumeMode::kResume);
  EXPECT_THAT(resumed, HasSubstr("resuming from it with changed settings: "));
  EXPECT_THAT(resumed, HasSubstr("--learning_rate 0.5 (now 0.1)"));
}

// The record names each setting by the flag that sets it, however deep its key lies, and refuses
// to resume another model's checkpoint by the rule its row gives.
TEST(ResumeCheck, AChangedNestedSettingIsNamedByItsFlag) {
  testing::TempDir dir;
  TrainConfig c = config_in(dir.path());
  c.lr_decay_steps = 100;
  save_checkpoint_of(c, 40);
  c.lr_decay_steps = 200;
  c.lr_schedule = LrDecay::kCosine;
  const std::string error = refusal(c, ResumeMode::kDefault);
  EXPECT_THAT(error, HasSubstr("--lr_decay_steps 100 (now 200)"));
  EXPECT_THAT(error, HasSubstr("--lr_schedule exponential (now cosine)"));
  EXPECT_THAT(error, HasSubstr("pass --resume"));
  c.model.hidden_units += 1;
  const std::string another_model = refusal(c, ResumeMode::kResume);
  EXPECT_THAT(another_model, HasSubstr("--hidden_units 100 (now 101), --lr_schedule"));
  EXPECT_THAT(another_model, HasSubstr("cannot be resumed with these"));
}

TEST(ResumeCheck, TheModelsTrainingDefaultsAreNotItsArchitecture) {
  testing::TempDir dir;
  const TrainConfig c = config_in(dir.path());
  // As a checkpoint written before the spec carried the defaults records it.
  nlohmann::json recorded = train_config_json(c);
  ASSERT_TRUE(recorded["model_spec"].contains("dtrain"));
  recorded["model_spec"].erase("dtrain");
  const std::vector<float> w(4, 1.0f);
  const TensorRef tensor{"w", {2, 2}, w};
  CheckpointManager(c.train_dir)
      .save({40, c.model.name, c.optimizer.name, recorded}, std::span<const TensorRef>(&tensor, 1));
  const auto found = find_checkpoint(c);
  ASSERT_TRUE(found);
  EXPECT_TRUE(found->changes.empty()) << describe_changes(found->changes);
}

TEST(ResumeCheck, AnotherModelCannotBeResumedEvenWhenAskedTo) {
  testing::TempDir dir;
  TrainConfig c = config_in(dir.path());
  save_checkpoint_of(c, 40);
  c.optimizer.name = c.optimizer.name == "adam" ? "sgd" : "adam";
  const std::string error = refusal(c, ResumeMode::kResume);
  EXPECT_THAT(error, HasSubstr("--optimizer"));
  EXPECT_THAT(error, HasSubstr("cannot be resumed with these; pass --overwrite"));
}

TEST(ResumeCheck, OverwriteDeletesTheCheckpointsAndMetricsButNothingElse) {
  testing::TempDir dir;
  const TrainConfig c = config_in(dir.path());
  save_checkpoint_of(c, 10);
  save_checkpoint_of(c, 20);
  TrainConfig best = c;  // an earlier run's --early_stopping_patience weights
  best.train_dir = dir.path() / "best";
  save_checkpoint_of(best, 10);
  std::ofstream(dir.path() / "metrics.jsonl") << "{}\n";
  std::ofstream(dir.path() / "notes.txt") << "mine\n";
  EXPECT_THAT(settle(c, ResumeMode::kOverwrite),
              HasSubstr("--overwrite: removed 2 checkpoint(s), 1 in best/ and metrics.jsonl from"));
  EXPECT_TRUE(CheckpointManager(dir.path() / "best").list().empty());
  EXPECT_FALSE(find_checkpoint(c));
  EXPECT_TRUE(CheckpointManager(dir.path()).list().empty());
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "checkpoint"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "metrics.jsonl"));
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "notes.txt"));
}

}  // namespace
}  // namespace dtrain
