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

  ProcessResult train(const std::vector<std::string>& extra) {
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
                                     "10",
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

}  // namespace
}  // namespace dtrain::testing
