// find_json_nesting_beyond: where arrays and objects pass a depth, strings not counted.
#include "base/json_depth.h"

#include <gtest/gtest.h>

#include <string>

namespace dtrain {
namespace {

std::string nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(JsonDepth, NestingUpToTheLimitPassesAndOneLevelMoreIsFoundWhereItOpens) {
  EXPECT_EQ(find_json_nesting_beyond(nested(64), 64), std::nullopt);
  EXPECT_EQ(find_json_nesting_beyond(nested(65), 64), std::optional<size_t>(64));
  const std::string mixed = R"({"a": [{"b": [1]}], "c": {}})";
  EXPECT_EQ(find_json_nesting_beyond(mixed, 4), std::nullopt);
  EXPECT_EQ(find_json_nesting_beyond(mixed, 3), mixed.find("[1]"));
}

TEST(JsonDepth, BracketsInsideStringsDoNotCountAndEscapedQuotesDoNotEndThem) {
  const std::string text = R"(["[[[[", "\"[[[[", "\\", {"k": "{{{{"}])";
  EXPECT_EQ(find_json_nesting_beyond(text, 2), std::nullopt);
  EXPECT_EQ(find_json_nesting_beyond(text, 1), text.find('{'));
}

TEST(JsonDepth, ClosingBracketsBeyondTheOpenOnesDoNotLowerTheDepthBelowZero) {
  EXPECT_EQ(find_json_nesting_beyond("]]]]" + nested(3), 2), std::optional<size_t>(6));
}

}  // namespace
}  // namespace dtrain
