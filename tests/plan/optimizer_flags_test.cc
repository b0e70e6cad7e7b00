// The optimizer's flags in the run plan: the hyper-parameters of the optimizer chosen, refused for
// another; and a model file's compiled optimizer, honoured or set aside by --optimizer, said so.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "plan/run_plan.h"
#include "support/plan_args.h"
#include "support/temp_dir.h"

namespace dtrain {
namespace {

using testing::plan_of;

std::string refusal(const std::vector<std::string>& args) {
  try {
    plan_of(args);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(OptimizerFlags, EachHyperParameterReachesTheOptimizerAndDefaultsAreTheOptimizers) {
  const RunPlan rmsprop = plan_of({"--model", "softmax", "--optimizer", "rmsprop", "--rho", "0.8",
                                   "--momentum", "0.5", "--centered", "--clipnorm", "2"});
  const OptimizerConfig& o = rmsprop.config.optimizer;
  EXPECT_EQ(o.name, "rmsprop");
  EXPECT_FLOAT_EQ(o.rho, 0.8f);
  EXPECT_FLOAT_EQ(optimizer_defaults(o).momentum, 0.5f);
  EXPECT_TRUE(o.centered);
  EXPECT_FLOAT_EQ(o.clipnorm, 2.0f);
  EXPECT_FLOAT_EQ(optimizer_defaults(o).epsilon, 1e-7f);  // Keras'
  const RunPlan adamw = plan_of({"--model", "softmax", "--optimizer", "adamw"});
  EXPECT_FLOAT_EQ(optimizer_defaults(adamw.config.optimizer).weight_decay, 0.004f);
  const RunPlan momentum = plan_of({"--model", "softmax", "--optimizer", "momentum"});
  EXPECT_FLOAT_EQ(optimizer_defaults(momentum.config.optimizer).momentum, 0.9f);
}

TEST(OptimizerFlags, AnotherOptimizersSettingOrTwoClippingsAreRefusedByName) {
  EXPECT_EQ(refusal({"--model", "softmax", "--optimizer", "adam", "--rho", "0.8"}),
            "--rho 0.8: means nothing to --optimizer adam; it is a setting of rmsprop");
  EXPECT_EQ(refusal({"--model", "softmax", "--optimizer", "sgd", "--nesterov"}),
            "--nesterov: sgd's Nesterov momentum needs --momentum above 0");
  EXPECT_THAT(refusal({"--model", "softmax", "--clipnorm", "1", "--clipvalue", "2"}),
              ::testing::HasSubstr("--clipnorm 1 and --clipvalue 2: choose one way to clip"));
  EXPECT_THAT(refusal({"--model", "softmax", "--optimizer", "rmsprop", "--rho", "1"}),
              ::testing::HasSubstr("--rho 1: must be in [0, 1)"));
}

constexpr const char* kCompiled = R"({"class_name": "Sequential", "config": {"name": "m",
  "layers": [{"class_name": "InputLayer", "config": {"batch_input_shape": [null, 784]}},
  {"class_name": "Dense", "config": {"name": "out", "units": 10, "activation": "softmax"}}]},
  "training_config": {"loss": "sparse_categorical_crossentropy", "optimizer_config": {
  "class_name": "RMSprop", "config": {"name": "RMSprop", "learning_rate": 0.01, "rho": 0.8,
  "momentum": 0.0, "epsilon": 1e-07, "centered": false}}}})";

// The bug this replaces: a training_config naming RMSprop trained on Adam, without a word.
TEST(OptimizerFlags, AModelFilesCompiledOptimizerIsHonouredAndAFlagOverItIsSaid) {
  testing::TempDir work;
  testing::write_bytes(work / "m.json", kCompiled);
  const std::string model = (work / "m.json").string();
  const RunPlan honoured = plan_of({"--model", model});
  EXPECT_EQ(honoured.config.optimizer.name, "rmsprop");
  EXPECT_FLOAT_EQ(honoured.config.optimizer.rho, 0.8f);
  EXPECT_FLOAT_EQ(honoured.config.learning_rate, 0.01f);
  EXPECT_THAT(honoured.config.optimizer_note,
              ::testing::HasSubstr("m.json's training_config optimizer_config RMSprop: "));
  EXPECT_THAT(honoured.config.optimizer_note, ::testing::HasSubstr("learning_rate 0.01"));
  const RunPlan rate = plan_of({"--model", model, "--learning_rate", "0.1"});
  EXPECT_EQ(rate.config.optimizer.name, "rmsprop");
  EXPECT_FLOAT_EQ(rate.config.learning_rate, 0.1f);
  EXPECT_THAT(rate.config.optimizer_note, ::testing::HasSubstr("(--learning_rate given)"));
  const RunPlan replaced = plan_of({"--model", model, "--optimizer", "adam"});
  EXPECT_EQ(replaced.config.optimizer.name, "adam");
  EXPECT_FLOAT_EQ(replaced.config.optimizer.rho, OptimizerConfig{}.rho);
  EXPECT_THAT(replaced.config.optimizer_note, ::testing::StartsWith("not "));
  EXPECT_THAT(replaced.config.optimizer_note,
              ::testing::HasSubstr("m.json's training_config optimizer_config RMSprop (rmsprop): "
                                   "--optimizer adam is given"));
}

}  // namespace
}  // namespace dtrain
