// The offset arithmetic of the ring: segments and chunks tile the buffer, and the send/receive
// rule leaves every rank with one complete segment after reduce-scatter.
#include "collective/ring_schedule.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace dtrain {
namespace {

TEST(RingScheduleTest, SegmentsTileTheBufferInNearEqualParts) {
  for (int n = 1; n <= 7; ++n) {
    for (size_t length : {size_t{0}, size_t{1}, size_t(n - 1), size_t(n + 1), size_t{1000003}}) {
      size_t next = 0, smallest = length, largest = 0;
      for (int k = 0; k < n; ++k) {
        const Range segment = ring_segment(length, n, k);
        EXPECT_EQ(segment.begin, next) << "n=" << n << " length=" << length << " k=" << k;
        next = segment.begin + segment.size;
        smallest = std::min(smallest, segment.size);
        largest = std::max(largest, segment.size);
      }
      EXPECT_EQ(next, length);
      EXPECT_LE(largest - smallest, 1u);
    }
  }
}

TEST(RingScheduleTest, ChunksTileEachSegmentAndRespectTheLimit) {
  const size_t length = 1000003;
  const int n = 3;
  const size_t max_chunk = 4096;
  const size_t chunks = chunks_per_segment(length, n, max_chunk);
  for (int k = 0; k < n; ++k) {
    const Range segment = ring_segment(length, n, k);
    size_t next = segment.begin;
    for (size_t c = 0; c < chunks; ++c) {
      const Range chunk = segment_chunk(segment, chunks, c);
      EXPECT_EQ(chunk.begin, next);
      EXPECT_LE(chunk.size, max_chunk);
      next = chunk.begin + chunk.size;
    }
    EXPECT_EQ(next, segment.begin + segment.size);
  }
}

TEST(RingScheduleTest, EmptyBuffersStillHaveOneChunkPerSegment) {
  EXPECT_EQ(chunks_per_segment(0, 4, 16), 1u);
  EXPECT_EQ(chunks_per_segment(3, 4, 16), 1u);
  EXPECT_EQ(segment_chunk(ring_segment(0, 4, 2), 1, 0).size, 0u);
}

// Simulates reduce-scatter on sets of contributors: rank r starts with {r} in every segment, and
// each step adds the sender's set for the received segment to the receiver's.
TEST(RingScheduleTest, ReduceScatterLeavesRankRWithTheWholeOfSegmentRPlusOne) {
  for (int n = 2; n <= 6; ++n) {
    std::vector<std::vector<std::set<int>>> held(n, std::vector<std::set<int>>(n));
    for (int r = 0; r < n; ++r) {
      for (int k = 0; k < n; ++k) held[r][k] = {r};
    }
    for (int step = 0; step < n - 1; ++step) {
      auto before = held;
      for (int r = 0; r < n; ++r) {
        const int left = (r + n - 1) % n;
        const int segment = received_segment(r, n, step);
        ASSERT_EQ(segment, sent_segment(left, n, step)) << "the left sends what r receives";
        held[r][segment].insert(before[left][segment].begin(), before[left][segment].end());
      }
    }
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(held[r][(r + 1) % n].size(), static_cast<size_t>(n)) << "n=" << n << " r=" << r;
      EXPECT_EQ(sent_segment(r, n, n - 1), (r + 1) % n) << "all-gather starts from it";
    }
  }
}

}  // namespace
}  // namespace dtrain
