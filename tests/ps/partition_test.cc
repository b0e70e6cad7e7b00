// The partition map: every value in exactly one shard, whole rows, balance, round-robin order and
// determinism, over mnist_inference's layout (hid_w 500x784, hid_b 500, sm_w 10x500, sm_b 10).
#include "ps/partition.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <tuple>
#include <utility>

#include "base/error.h"

namespace dtrain {
namespace {

ParamSet mnist_inference_layout() {
  return ParamSet({ParamSpec{"hid_w", {500, 784}}, ParamSpec{"hid_b", {500}},
                   ParamSpec{"sm_w", {10, 500}}, ParamSpec{"sm_b", {10}}});
}

size_t row_size(const ParamSet& layout, size_t t) {
  return layout.values(t).size() / layout.rows(t);
}

// Every value of every tensor in exactly one shard, each shard a whole-row range whose arena
// offsets agree with its rows, and shards_of_ps naming exactly the shards of each task.
void expect_exact_cover(const ParamSet& layout, const PartitionMap& map, int num_ps) {
  ASSERT_EQ(map.num_ps(), num_ps);
  std::vector<std::vector<int>> hits(layout.count());
  for (size_t t = 0; t < layout.count(); ++t) hits[t].assign(layout.values(t).size(), 0);
  for (const Shard& shard : map.shards) {
    ASSERT_LT(shard.tensor, layout.count());
    ASSERT_GE(shard.ps, 0);
    ASSERT_LT(shard.ps, num_ps);
    ASSERT_LE(shard.row_begin, shard.row_end);
    ASSERT_LE(shard.row_end, layout.rows(shard.tensor));
    const size_t base = layout.offset(shard.tensor), rs = row_size(layout, shard.tensor);
    EXPECT_EQ(shard.begin, base + shard.row_begin * rs);
    EXPECT_EQ(shard.end, base + shard.row_end * rs);
    if (layout.values(shard.tensor).size() > 0) {
      EXPECT_LT(shard.begin, shard.end) << "empty shard of tensor " << shard.tensor;
    }
    for (size_t i = shard.begin; i < shard.end; ++i) ++hits[shard.tensor][i - base];
  }
  for (size_t t = 0; t < layout.count(); ++t) {
    for (size_t i = 0; i < hits[t].size(); ++i)
      ASSERT_EQ(hits[t][i], 1) << "tensor " << t << " value " << i;
  }
  size_t listed = 0;
  for (int p = 0; p < num_ps; ++p) {
    for (size_t i : map.shards_of_ps[p]) EXPECT_EQ(map.shards[i].ps, p);
    listed += map.shards_of_ps[p].size();
  }
  EXPECT_EQ(listed, map.shards.size());
}

TEST(PartitionTest, BalancedCoversEveryValueExactlyOnceInWholeRows) {
  const ParamSet layout = mnist_inference_layout();
  for (int num_ps = 1; num_ps <= 4; ++num_ps) {
    SCOPED_TRACE(num_ps);
    expect_exact_cover(layout, make_partition(layout, num_ps, Placement::kBalanced), num_ps);
  }
}

TEST(PartitionTest, RoundRobinCoversEveryValueExactlyOnce) {
  const ParamSet layout = mnist_inference_layout();
  for (int num_ps = 1; num_ps <= 4; ++num_ps) {
    SCOPED_TRACE(num_ps);
    expect_exact_cover(layout, make_partition(layout, num_ps, Placement::kRoundRobin), num_ps);
  }
}

TEST(PartitionTest, ShardsAreSortedByPsTensorAndRow) {
  const ParamSet layout = mnist_inference_layout();
  const PartitionMap map = make_partition(layout, 3, Placement::kBalanced);
  for (size_t i = 1; i < map.shards.size(); ++i) {
    const Shard &a = map.shards[i - 1], &b = map.shards[i];
    EXPECT_TRUE(std::tie(a.ps, a.tensor, a.row_begin) < std::tie(b.ps, b.tensor, b.row_begin));
  }
}

TEST(PartitionTest, BalancedHoldsEqualBytesWithinOneRow) {
  const ParamSet layout = mnist_inference_layout();
  const double total = static_cast<double>(layout.num_values()) * sizeof(float);
  const double row_bytes = 784 * sizeof(float);  // the widest row: one row of hid_w
  for (int num_ps = 1; num_ps <= 4; ++num_ps) {
    SCOPED_TRACE(num_ps);
    const PartitionMap map = make_partition(layout, num_ps, Placement::kBalanced);
    for (int p = 0; p < num_ps; ++p)
      EXPECT_LE(std::abs(static_cast<double>(map.bytes_on(p)) - total / num_ps), row_bytes) << p;
  }
}

TEST(PartitionTest, BalancedKeepsSmallTensorsWholeAndSplitsLargeOnes) {
  const ParamSet layout = mnist_inference_layout();
  const PartitionMap map = make_partition(layout, 4, Placement::kBalanced);
  std::vector<int> pieces(layout.count(), 0);
  for (const Shard& shard : map.shards) ++pieces[shard.tensor];
  EXPECT_EQ(pieces[0], 4);  // hid_w: 1.5 MB, over min_shard_bytes
  EXPECT_EQ(pieces[1], 1);
  EXPECT_EQ(pieces[2], 1);  // sm_w: 20 kB
  EXPECT_EQ(pieces[3], 1);
}

TEST(PartitionTest, BalancedPlacesSmallTensorsLargestFirstOnLeastLoadedPs) {
  // All small: sm_w (20000 B) -> ps0, hid_b (2000 B) -> ps1, sm_b (40 B) -> ps1 (less loaded).
  const ParamSet layout(
      {ParamSpec{"hid_b", {500}}, ParamSpec{"sm_w", {10, 500}}, ParamSpec{"sm_b", {10}}});
  const PartitionMap map = make_partition(layout, 2, Placement::kBalanced);
  ASSERT_EQ(map.shards.size(), 3u);
  EXPECT_EQ(map.shards[0], (Shard{0, 1, 0, 10, layout.offset(1), layout.offset(1) + 5000}));
  EXPECT_EQ(map.shards[1].ps, 1);
  EXPECT_EQ(map.shards[1].tensor, 0u);
  EXPECT_EQ(map.shards[2].ps, 1);
  EXPECT_EQ(map.shards[2].tensor, 2u);
}

TEST(PartitionTest, EqualSmallTensorsTieToLowestPs) {
  const ParamSet layout({ParamSpec{"a", {4}}, ParamSpec{"b", {4}}, ParamSpec{"c", {4}}});
  const PartitionMap map = make_partition(layout, 2, Placement::kBalanced);
  ASSERT_EQ(map.shards.size(), 3u);
  EXPECT_EQ(map.shards[0].tensor, 0u);  // a -> ps0, b -> ps1, c -> ps0
  EXPECT_EQ(map.shards[0].ps, 0);
  EXPECT_EQ(map.shards[1].tensor, 2u);
  EXPECT_EQ(map.shards[1].ps, 0);
  EXPECT_EQ(map.shards[2].tensor, 1u);
  EXPECT_EQ(map.shards[2].ps, 1);
}

TEST(PartitionTest, RoundRobinPlacesWholeTensorsInDeclarationOrder) {
  const ParamSet layout = mnist_inference_layout();
  const PartitionMap map = make_partition(layout, 3, Placement::kRoundRobin);
  ASSERT_EQ(map.shards.size(), 4u);
  // Sorted by ps: ps0 holds hid_w and sm_b, ps1 hid_b, ps2 sm_w.
  const std::vector<std::pair<int, size_t>> expected = {{0, 0}, {0, 3}, {1, 1}, {2, 2}};
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(map.shards[i].ps, expected[i].first);
    EXPECT_EQ(map.shards[i].tensor, expected[i].second);
    EXPECT_EQ(map.shards[i].row_begin, 0u);
    EXPECT_EQ(map.shards[i].row_end, layout.rows(expected[i].second));
  }
  EXPECT_EQ(map.bytes_on(0), (500 * 784 + 10) * sizeof(float));
}

TEST(PartitionTest, SamePolicyAndLayoutGiveTheSameMap) {
  for (Placement placement : {Placement::kBalanced, Placement::kRoundRobin}) {
    EXPECT_EQ(make_partition(mnist_inference_layout(), 3, placement),
              make_partition(mnist_inference_layout(), 3, placement));
  }
}

TEST(PartitionTest, FewerThanOnePsIsAUsageError) {
  const ParamSet layout = mnist_inference_layout();
  EXPECT_THROW(make_partition(layout, 0, Placement::kBalanced), UsageError);
  EXPECT_THROW(make_partition(layout, -1, Placement::kRoundRobin), UsageError);
}

TEST(PartitionTest, TensorWithFewerRowsThanPsIsSplitOnlyAtRows) {
  // 3 rows of 100000 values (400 kB each) over 4 ps: at most 3 shards, each whole rows.
  const ParamSet layout({ParamSpec{"wide", {3, 100000}}, ParamSpec{"bias", {7}}});
  const PartitionMap map = make_partition(layout, 4, Placement::kBalanced);
  expect_exact_cover(layout, map, 4);
  int pieces = 0;
  for (const Shard& shard : map.shards) pieces += shard.tensor == 0;
  EXPECT_EQ(pieces, 3);
}

TEST(PartitionTest, MorePsThanTensorsLeavesSomePsEmpty) {
  const ParamSet layout({ParamSpec{"w", {2, 2}}, ParamSpec{"b", {2}}});
  const PartitionMap map = make_partition(layout, 4, Placement::kRoundRobin);
  expect_exact_cover(layout, map, 4);
  EXPECT_TRUE(map.shards_of_ps[2].empty());
  EXPECT_EQ(map.bytes_on(3), 0u);
}

TEST(PartitionTest, MinShardBytesDecidesWhatIsSplit) {
  const ParamSet layout = mnist_inference_layout();
  // With a threshold above hid_w, everything is placed whole.
  const PartitionMap whole = make_partition(layout, 2, Placement::kBalanced, 2 * 1024 * 1024);
  expect_exact_cover(layout, whole, 2);
  EXPECT_EQ(whole.shards.size(), 4u);
  // With no threshold every tensor joins the stream of rows that is cut; the cover stays exact.
  const PartitionMap split = make_partition(layout, 2, Placement::kBalanced, 0);
  expect_exact_cover(layout, split, 2);
  EXPECT_GT(split.shards.size(), 4u);
}

TEST(PartitionTest, ParsePlacementNamesTheFlagForUnknownValues) {
  EXPECT_EQ(parse_placement("balanced"), Placement::kBalanced);
  EXPECT_EQ(parse_placement("round_robin"), Placement::kRoundRobin);
  EXPECT_EQ(placement_name(Placement::kRoundRobin), "round_robin");
  try {
    parse_placement("striped");
    FAIL() << "no UsageError";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("--placement"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("striped"));
  }
}

}  // namespace
}  // namespace dtrain
