// Peer text made safe to print, and warnings a flood cannot multiply.
#include "base/peer_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "base/rate_limited_warning.h"
#include "comm/loopback.h"
#include "support/text_match.h"

namespace dtrain {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(PeerText, PrintableAsciiStaysAndEverythingElseIsEscaped) {
  EXPECT_EQ(peer_text("ps0: shard 3 is not held here"), "ps0: shard 3 is not held here");
  EXPECT_EQ(peer_text("a\nforged line"), "a\\nforged line");
  EXPECT_EQ(peer_text("stop\x1b[2J\tnow\\"), "stop\\x1b[2J\\tnow\\\\");
  EXPECT_EQ(peer_text(std::string("nul\0byte\xff", 9)), "nul\\x00byte\\xff");
}

TEST(PeerText, LongTextIsCut) {
  const std::string text = peer_text(std::string(5000, 'x'), 100);
  EXPECT_EQ(text, std::string(100, 'x') + "…");
}

TEST(RateLimitedWarning, TheFirstFewOfAWindowAreLoggedAndTheRestSummedUpByKind) {
  testing::LogCapture log;
  {
    RateLimitedWarning warning("server on port 1", "rejected connections", 3,
                               std::chrono::hours(1));
    for (int i = 0; i < 50; ++i) warning.warn("shed", "dropped connection " + std::to_string(i));
    for (int i = 0; i < 7; ++i) warning.warn("failed authentication", "wrong secret");
    EXPECT_THAT(log.text(), Not(HasSubstr("not logged one by one")));
  }  // the summary of the window still open
  const std::string text = log.text();
  EXPECT_EQ(testing::all_matches(text, "dropped connection [0-9]+").size(), 3u);
  EXPECT_THAT(text, Not(HasSubstr("wrong secret")));
  EXPECT_THAT(text, HasSubstr("server on port 1: 54 more rejected connections in the last"));
  EXPECT_THAT(text, HasSubstr("not logged one by one (7 failed authentication, 47 shed)"));
}

TEST(RateLimitedWarning, ANewWindowLogsAgain) {
  testing::LogCapture log;
  RateLimitedWarning warning("relay", "events", 1, std::chrono::nanoseconds(0));
  warning.warn("kind", "first");
  warning.warn("kind", "second");  // a window of no time is over at once
  EXPECT_THAT(log.text(), AllOf(HasSubstr("first"), HasSubstr("second")));
}

}  // namespace
}  // namespace dtrain
