// BatchNormalization's warning after training: Keras' moving statistics are not debiased, so after
// n updates a moving variance still holds momentum^n of its initial value, and a short run
// evaluates on a variance it has not reached. The warning names the statistic when that share is,
// averaged over the channels, at least half of it; otherwise nothing is said.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nn/batch_norm.h"
#include "nn/model.h"

namespace dtrain {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

BatchNormOptions warned_layer_options(float momentum) {
  return {.shape = {4, 4, 2},
          .momentum = momentum,
          .gamma_name = "bn1/gamma",
          .beta_name = "bn1/beta",
          .moving_mean_name = "bn1/moving_mean",
          .moving_variance_name = "bn1/moving_variance"};
}

// The parameters of a layer whose two channels' moving variances are `variance`.
ParamSet warned_layer_params(const BatchNorm& layer, std::vector<float> variance) {
  ParamSet params(layer.param_specs());
  std::copy(variance.begin(), variance.end(), params.values(3).begin());
  return params;
}

TEST(BatchNormWarning, AVarianceStillMostlyItsStartIsNamedWithTheShareAndTheFix) {
  BatchNorm layer(warned_layer_options(0.99f));
  layer.set_first_param(0);
  // 0.99^275 = 0.063 of the initial 1 remains: 97% and 72% of these variances, 85% on average.
  const ParamSet params = warned_layer_params(layer, {0.065f, 0.0875f});
  const std::string warning = layer.statistics_warning(params, 275);
  EXPECT_THAT(warning, HasSubstr("bn1/moving_variance: after 275 updates at momentum 0.99"));
  EXPECT_THAT(warning, HasSubstr("0.99^275 = 0.063 of its initial 1, on average 85% of its value"));
  EXPECT_THAT(warning, HasSubstr("train more steps"));
  EXPECT_THAT(warning, HasSubstr("lower momentum"));
}

TEST(BatchNormWarning, NothingIsSaidOnceTheStartIsLessThanHalfOfTheVariance) {
  BatchNorm layer(warned_layer_options(0.99f));
  layer.set_first_param(0);
  // After 550 updates 0.004 remains: 40% and 20% of these, 30% on average.
  EXPECT_THAT(layer.statistics_warning(warned_layer_params(layer, {0.01f, 0.02f}), 550), IsEmpty());
  // The same variances after 275 updates: 0.063 is most of them.
  EXPECT_THAT(layer.statistics_warning(warned_layer_params(layer, {0.01f, 0.02f}), 275),
              HasSubstr("on average 100%"));
  // A lower momentum forgets its start within a few steps.
  BatchNorm quick(warned_layer_options(0.5f));
  quick.set_first_param(0);
  EXPECT_THAT(quick.statistics_warning(warned_layer_params(quick, {0.01f, 0.02f}), 30), IsEmpty());
}

TEST(BatchNormWarning, AModelGathersItsLayersWarnings) {
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(std::make_unique<BatchNorm>(warned_layer_options(0.99f)));
  BatchNormOptions second = warned_layer_options(0.9f);
  second.gamma_name = "bn2/gamma";
  second.beta_name = "bn2/beta";
  second.moving_mean_name = "bn2/moving_mean";
  second.moving_variance_name = "bn2/moving_variance";
  layers.push_back(std::make_unique<BatchNorm>(second));
  const Model model("two_bn", std::move(layers));
  ParamSet params(model.param_specs());
  for (float& v : params.values(3)) v = 0.05f;  // bn1: 0.063 of 1 remains, beyond 0.05
  for (float& v : params.values(7)) v = 0.05f;  // bn2: 0.9^275, nothing
  const std::vector<std::string> warnings = model.statistics_warnings(params, 275);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("bn1/moving_variance"));
}

}  // namespace
}  // namespace dtrain
