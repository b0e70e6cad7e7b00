// A second run into the same --train_dir, as users make one: it says what it found, refuses other
// settings by name, goes on with --resume, starts afresh with --overwrite, and says when there is
// nothing left to train. Real processes on a tiny CSV and a one-layer Keras model.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "support/process.h"
#include "support/ps_cluster.h"
#include "support/temp_dir.h"

namespace dtrain::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class TrainDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.path() / "model.json") << R"({"class_name": "Sequential", "config": {
        "layers": [{"class_name": "Dense", "config": {"units": 3, "batch_input_shape": [null, 4],
                                                      "activation": "softmax"}}]}})";
    std::ofstream csv(dir_.path() / "data.csv");
    csv << "a,b,c,d,label\n";
    for (int i = 0; i < 60; ++i) csv << i % 3 << ",1," << i % 5 << ",0," << i % 3 << "\n";
  }

  ProcessResult train(const std::vector<std::string>& extra, const std::string& batch = "10") {
    const std::string data = (dir_.path() / "data.csv").string();
    std::vector<std::string> args = {"train",
                                     "--model",
                                     (dir_.path() / "model.json").string(),
                                     "--train_data",
                                     data,
                                     "--test_data",
                                     data,
                                     "--train_dir",
                                     (dir_.path() / "run").string(),
                                     "--batch_size",
                                     batch,
                                     "--log_every",
                                     "0",
                                     "--summary_steps",
                                     "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_dtrain(args);
  }

  TempDir dir_;
};

TEST_F(TrainDirTest, ASecondRunSaysWhatItFoundAndRefusesOtherSettingsUnlessTold) {
  const ProcessResult first = train({"--train_steps", "6", "--learning_rate", "0.5"});
  ASSERT_EQ(first.exit_code, 0) << all_output(first);
  EXPECT_THAT(first.out, Not(HasSubstr("found ")));

  const ProcessResult again = train({"--train_steps", "6", "--learning_rate", "0.5"});
  ASSERT_EQ(again.exit_code, 0) << all_output(again);
  EXPECT_THAT(again.out,
              HasSubstr("(global step 6): resuming from it (--overwrite starts afresh)"));
  EXPECT_THAT(again.out, HasSubstr("already finished at step 6"));

  const ProcessResult changed = train({"--train_steps", "12", "--learning_rate", "0.1"});
  EXPECT_EQ(changed.exit_code, 2) << all_output(changed);
  EXPECT_THAT(changed.err, HasSubstr("holds a checkpoint of step 6 trained with other settings: "
                                     "--learning_rate 0.5 (now 0.1); pass --resume"));

  const ProcessResult resumed =
      train({"--train_steps", "12", "--learning_rate", "0.1", "--resume"});
  ASSERT_EQ(resumed.exit_code, 0) << all_output(resumed);
  EXPECT_THAT(resumed.out,
              HasSubstr("resuming from it with changed settings: --learning_rate 0.5 (now 0.1)"));
  EXPECT_THAT(resumed.out, HasSubstr("(6 steps,"));

  const ProcessResult afresh = train({"--train_steps", "4", "--overwrite"});
  ASSERT_EQ(afresh.exit_code, 0) << all_output(afresh);
  EXPECT_THAT(afresh.out, HasSubstr("--overwrite: removed "));
  EXPECT_THAT(afresh.out, HasSubstr("(4 steps,"));
}

// Two all-reduce workers train on 20 examples a step (3 steps an epoch of 60); a local run on 10
// (6 steps an epoch). Resuming one's checkpoint with the other is another recipe: refused by name,
// said with --resume. The same --batch_size with the same workers per step resumes without a word.
TEST_F(TrainDirTest, AnotherWorkerCountIsAnotherGlobalBatchRefusedUnlessResumed) {
  const ProcessResult two =
      train({"--strategy", "allreduce", "--workers", "2", "--train_steps", "3"});
  ASSERT_EQ(two.exit_code, 0) << all_output(two);

  const ProcessResult local = train({"--strategy", "local", "--train_steps", "6"});
  EXPECT_EQ(local.exit_code, 2) << all_output(local);
  EXPECT_THAT(local.err, HasSubstr("holds a checkpoint of step 3 trained with other settings: the "
                                   "global batch (--batch_size × workers per step) 20 (now 10); "
                                   "pass --resume"));

  const ProcessResult resumed = train({"--strategy", "local", "--train_steps", "6", "--resume"});
  ASSERT_EQ(resumed.exit_code, 0) << all_output(resumed);
  EXPECT_THAT(resumed.out, HasSubstr("resuming from it with changed settings: the global batch "
                                     "(--batch_size × workers per step) 20 (now 10)"));
  EXPECT_THAT(resumed.out, HasSubstr("(3 steps,"));
}

TEST_F(TrainDirTest, ABatchSizeChangeIsNamedOnceNotAgainAsTheGlobalBatch) {
  ASSERT_EQ(train({"--train_steps", "3"}).exit_code, 0);
  const ProcessResult changed = train({"--train_steps", "6"}, "5");
  EXPECT_EQ(changed.exit_code, 2) << all_output(changed);
  EXPECT_THAT(changed.err, HasSubstr("other settings: --batch_size 10 (now 5); pass --resume"));
}

}  // namespace
}  // namespace dtrain::testing
