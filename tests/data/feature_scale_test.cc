// --feature_scale's values: fractions and numbers parsed without a locale, everything else refused,
// and "1/255" giving IDX's pixel scaling to the last bit.
#include "data/feature_scale.h"

#include <gtest/gtest.h>

namespace dtrain {
namespace {

TEST(FeatureScale, AFractionAndANumberAreRead) {
  const std::optional<FeatureScale> fraction = parse_feature_scale("1/255");
  ASSERT_TRUE(fraction);
  EXPECT_EQ(fraction->numerator, 1.0f);
  EXPECT_EQ(fraction->denominator, 255.0f);
  EXPECT_EQ(fraction->text, "1/255");
  const std::optional<FeatureScale> number = parse_feature_scale("0.5");
  ASSERT_TRUE(number);
  EXPECT_EQ(number->apply(3.0f), 1.5f);
  EXPECT_DOUBLE_EQ(parse_feature_scale("2/8")->value(), 0.25);
}

TEST(FeatureScale, ZeroNegativeNonFiniteAndMalformedScalesAreRefused) {
  for (const char* bad : {"", "0", "-1", "1/0", "1/-255", "abc", "1/255/3", "1/", "/255", "nan",
                          "inf", "1e39", "0x10", "1,5"}) {
    EXPECT_FALSE(parse_feature_scale(bad)) << "'" << bad << "'";
  }
}

TEST(FeatureScale, OneOver255ScalesEveryByteAsIdxPixelsAreScaled) {
  const FeatureScale scale = *parse_feature_scale("1/255");
  for (int byte = 0; byte <= 255; ++byte) {
    const float pixel = static_cast<float>(byte) / 255.0f;  // data/dataset.cc's scaling
    EXPECT_EQ(scale.apply(static_cast<float>(byte)), pixel) << byte;
  }
}

}  // namespace
}  // namespace dtrain
