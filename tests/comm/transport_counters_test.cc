// The process's transport counters: what peers that proved nothing can add to the page is bounded.
#include "comm/transport_counters.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

namespace dtrain {
namespace {

std::map<std::string, uint64_t> refusals_by_peer(const TransportCounters& counters,
                                                 const std::string& reason) {
  std::map<std::string, uint64_t> by_peer;
  for (const TransportCounters::Rejections& r : counters.rejections()) {
    if (r.reason == reason) by_peer[r.peer] += r.frames;
  }
  return by_peer;
}

TEST(TransportCounters, RefusalsFromManySourcesBeyondTheFirstFewAreCountedTogether) {
  TransportCounters counters;
  constexpr int kSources = 60'000;
  for (int i = 0; i < kSources; ++i) {
    counters.rejected(fmt::format("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255),
                      /*proved=*/false, "malformed");
  }
  // Each of the first few again: still under its own name.
  counters.rejected("10.0.0.0", false, "malformed");
  counters.rejected("10.0.0.15", false, "authentication");

  const std::map<std::string, uint64_t> malformed = refusals_by_peer(counters, "malformed");
  ASSERT_EQ(malformed.size(), TransportCounters::kMaxRefusingPeers + 1);
  EXPECT_EQ(malformed.at("10.0.0.0"), 2u);
  EXPECT_EQ(malformed.at("10.0.0.15"), 1u);
  EXPECT_EQ(malformed.count("10.0.0.16"), 0u);
  EXPECT_EQ(malformed.at(TransportCounters::kOtherPeers),
            kSources - TransportCounters::kMaxRefusingPeers);
  EXPECT_EQ(refusals_by_peer(counters, "authentication"),
            (std::map<std::string, uint64_t>{{"10.0.0.15", 1}}));
  EXPECT_EQ(counters.rejections().size(), TransportCounters::kMaxRefusingPeers + 2);
}

TEST(TransportCounters, PeersThatProvedTheirNameAreNotCrowdedOutByAddresses) {
  TransportCounters counters;
  for (int i = 0; i < 100; ++i) counters.rejected(fmt::format("10.0.0.{}", i), false, "malformed");
  counters.rejected("worker1", /*proved=*/true, "bad_tag");
  EXPECT_EQ(refusals_by_peer(counters, "bad_tag"),
            (std::map<std::string, uint64_t>{{"worker1", 1}}));
  // Names are bounded too, apart.
  for (int i = 0; i < 40; ++i) counters.rejected(fmt::format("worker{}", i), true, "bad_tag");
  const std::map<std::string, uint64_t> bad_tag = refusals_by_peer(counters, "bad_tag");
  EXPECT_EQ(bad_tag.size(), TransportCounters::kMaxRefusingPeers + 1);
  EXPECT_EQ(bad_tag.at("worker1"), 2u);
  EXPECT_EQ(bad_tag.at(TransportCounters::kOtherPeers), 40 - TransportCounters::kMaxRefusingPeers);
}

}  // namespace
}  // namespace dtrain
