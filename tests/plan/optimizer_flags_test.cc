// The optimizer's flags in the run plan: the hyper-parameters of the optimizer chosen, refused for
// another.
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

}  // namespace
}  // namespace dtrain
