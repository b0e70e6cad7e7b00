// Data options as a checkpoint records them: what eval, predict, export and the Python API read
// back, the feature scale included.
#include "data/data_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"

namespace dtrain {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

TEST(DataOptionsJson, TheFeatureScaleIsRecordedAsGivenAndReadBack) {
  DataOptions options;
  options.label_column = "label";
  options.feature_scale = parse_feature_scale("1/255");
  const nlohmann::json json = data_options_json(options);
  EXPECT_EQ(json["feature_scale"], "1/255");
  const DataOptions back = data_options_from_json(json);
  ASSERT_TRUE(back.feature_scale);
  EXPECT_EQ(back.feature_scale->numerator, 1.0f);
  EXPECT_EQ(back.feature_scale->denominator, 255.0f);
  EXPECT_EQ(back.label_column, "label");
}

TEST(DataOptionsJson, NoScaleIsRecordedAsNoneAndAnUnreadableOneIsNamed) {
  const nlohmann::json json = data_options_json(DataOptions{});
  EXPECT_FALSE(json.contains("feature_scale"));
  EXPECT_FALSE(data_options_from_json(json).feature_scale);
  nlohmann::json bad = json;
  bad["feature_scale"] = "-3";
  EXPECT_THAT([&] { data_options_from_json(bad); },
              ThrowsMessage<DataError>(HasSubstr("feature scale \"-3\"")));
}

}  // namespace
}  // namespace dtrain
