// A checkpoint rebuilds its own model: with the Keras JSON it carries, and — for checkpoints
// written before models were stored — from the built-in model it names.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ckpt/checkpoint.h"
#include "support/checkpoints.h"
#include "support/process.h"
#include "support/temp_dir.h"
#include "support/text_match.h"

namespace dtrain::testing {
namespace {

using ::testing::HasSubstr;

TEST(CheckpointModel, ACheckpointWithoutItsModelSpecStillEvaluatesByItsModelName) {
  TempDir dir;
  const ProcessResult trained =
      run_dtrain({"train", "--model", "mlp", "--hidden_units", "32", "--train_steps", "200",
                  "--log_every", "0", "--threads", "1", "--train_dir", dir.path().string()});
  ASSERT_EQ(trained.exit_code, 0) << trained.err;

  // What an older dtrain wrote: the model's name and --hidden_units, no spec, no data record.
  const auto path = CheckpointManager(dir.path()).list().back();
  Checkpoint old = read_checkpoint(path);
  ASSERT_TRUE(old.config.contains("model_spec"));
  old.config.erase("model_spec");
  old.config.erase("data");
  write_checkpoint(path, old);

  const ProcessResult eval = run_dtrain({"eval", "--checkpoint", dir.path().string()});
  ASSERT_EQ(eval.exit_code, 0) << eval.err;
  EXPECT_THAT(eval.out, HasSubstr("model mlp"));
  EXPECT_NEAR(test_accuracy_in(eval.out), test_accuracy_in(trained.out), 1e-9) << eval.out;
}

TEST(CheckpointModel, AKerasModelIsRebuiltFromTheCheckpointEvenWhenItsFileIsGone) {
  TempDir dir, model_dir;
  const auto model = model_dir.path() / "model.json";
  std::filesystem::copy_file(
      std::filesystem::path(DTRAIN_SOURCE_DIR) / "examples/models/mlp_tanh_dropout.keras3.json",
      model);
  const ProcessResult trained =
      run_dtrain({"train", "--model", model.string(), "--train_steps", "100", "--log_every", "0",
                  "--threads", "1", "--train_dir", dir.path().string()});
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  std::filesystem::remove(model);
  const ProcessResult eval = run_dtrain({"eval", "--checkpoint", dir.path().string()});
  ASSERT_EQ(eval.exit_code, 0) << eval.err;
  EXPECT_NEAR(test_accuracy_in(eval.out), test_accuracy_in(trained.out), 1e-9) << eval.out;
}

}  // namespace
}  // namespace dtrain::testing
