// The ring and halving-doubling algorithms over in-memory links: results against a double-precision
// reference for every ring size and awkward length, message counts, broadcast and barrier.
#include "collective/ring_allreduce.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "collective/communicator.h"
#include "collective/memory_ring.h"
#include "collective/reduction_check.h"

namespace dtrain {
namespace {

// Runs an all-reduce of rank_values on every rank; returns each rank's result.
std::vector<std::vector<float>> allreduce_all(
    MemoryRing& ring, size_t length, ReduceOp op, size_t max_chunk_bytes,
    AllreduceAlgorithm algorithm = AllreduceAlgorithm::kRing) {
  std::vector<std::vector<float>> results(ring.size());
  ring.run([&](int rank) {
    results[rank] = testing::rank_values(rank, length);
    Communicator communicator(ring.links(rank),
                              {.max_chunk_bytes = max_chunk_bytes, .algorithm = algorithm});
    communicator.allreduce(results[rank], op);
  });
  return results;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  // memcmp may not be given the null pointer of an empty vector, even for zero bytes.
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

TEST(RingAllreduceTest, SumMatchesDoublePrecisionForEveryRingSizeAndLength) {
  for (int n = 1; n <= 6; ++n) {
    for (size_t length : {size_t{0}, size_t{1}, size_t(n - 1), size_t(n + 1), size_t{1000003}}) {
      MemoryRing ring(n);
      const auto results = allreduce_all(ring, length, ReduceOp::kSum, 64 * 1024);
      const auto exact = testing::exact_sum(n, length);
      const std::string where = "n=" + std::to_string(n) + " length=" + std::to_string(length);
      for (int r = 0; r < n; ++r) {
        testing::expect_matches_sum(results[r], exact, n, 1.0, where.c_str());
        EXPECT_TRUE(bitwise_equal(results[r], results[0])) << where << " rank " << r;
      }
    }
  }
}

TEST(RingAllreduceTest, AverageDividesByTheNumberOfRanks) {
  MemoryRing ring(3);
  const auto results = allreduce_all(ring, 1001, ReduceOp::kAverage, 64 * 1024);
  const auto exact = testing::exact_sum(3, 1001);
  for (int r = 0; r < 3; ++r) {
    testing::expect_matches_sum(results[r], exact, 3, 1.0 / 3, "average");
    EXPECT_TRUE(bitwise_equal(results[r], results[0]));
  }
}

TEST(RingAllreduceTest, OneFloatChunksPipelineThroughEveryStep) {
  MemoryRing ring(4);
  const size_t length = 37;
  const auto results = allreduce_all(ring, length, ReduceOp::kSum, sizeof(float));
  testing::expect_matches_sum(results[2], testing::exact_sum(4, length), 4, 1.0, "1-float chunks");
  // 2(n-1) steps of n ranks, each step one message per chunk; 37 floats in 4 segments of at most
  // 10 floats make 10 chunks per segment.
  EXPECT_EQ(ring.messages(), 2 * 3 * 4 * 10);
}

TEST(RingAllreduceTest, EachRankSendsTwiceTheBufferTimesNMinusOneOverN) {
  // The bandwidth-optimal property: message count per rank is 2(n-1) per chunk, not n-1 whole
  // buffers.
  MemoryRing ring(5);
  allreduce_all(ring, 5000, ReduceOp::kSum, 1000 * sizeof(float));
  EXPECT_EQ(ring.messages(), 5 * 2 * 4);  // one 1000-float chunk per segment
}

TEST(HalvingDoublingTest, SumMatchesDoublePrecisionForEveryLength) {
  for (size_t length : {size_t{0}, size_t{1}, size_t{3}, size_t{5}, size_t{1000003}}) {
    MemoryRing ring(4);
    const auto results = allreduce_all(ring, length, ReduceOp::kSum, 64 * 1024,
                                       AllreduceAlgorithm::kHalvingDoubling);
    const auto exact = testing::exact_sum(4, length);
    const std::string where = "length=" + std::to_string(length);
    for (int r = 0; r < 4; ++r) {
      testing::expect_matches_sum(results[r], exact, 4, 1.0, where.c_str());
      EXPECT_TRUE(bitwise_equal(results[r], results[0])) << where << " rank " << r;
    }
  }
}

TEST(HalvingDoublingTest, AverageDividesByFour) {
  MemoryRing ring(4);
  const auto results = allreduce_all(ring, 1001, ReduceOp::kAverage, 64 * 1024,
                                     AllreduceAlgorithm::kHalvingDoubling);
  for (int r = 0; r < 4; ++r) {
    testing::expect_matches_sum(results[r], testing::exact_sum(4, 1001), 4, 0.25, "average");
    EXPECT_TRUE(bitwise_equal(results[r], results[0]));
  }
}

// What it is for: four exchanges per rank where the ring takes six steps, and still only
// 2(n-1)/n of the buffer sent by each rank.
TEST(HalvingDoublingTest, FourExchangesOfHalfAQuarterAQuarterAndHalfTheBuffer) {
  MemoryRing ring(4);
  allreduce_all(ring, 4000, ReduceOp::kSum, 4000 * sizeof(float),
                AllreduceAlgorithm::kHalvingDoubling);
  EXPECT_EQ(ring.messages(), 4 * 4);
  EXPECT_EQ(ring.floats_sent(), 4 * (2000 + 1000 + 1000 + 2000));
}

TEST(HalvingDoublingTest, OneFloatChunksGiveTheSameSum) {
  MemoryRing ring(4);
  const auto results =
      allreduce_all(ring, 37, ReduceOp::kSum, sizeof(float), AllreduceAlgorithm::kHalvingDoubling);
  for (int r = 0; r < 4; ++r) {
    testing::expect_matches_sum(results[r], testing::exact_sum(4, 37), 4, 1.0, "1-float chunks");
  }
  // The halves are 19 and 18 floats. The two ranks that keep the 19 send 18, then a quarter of
  // 9 or 10, then the other quarter, then 19: 56. The two that keep the 18 send 19 + 9 + 9 + 18.
  EXPECT_EQ(ring.floats_sent(), 2 * 56 + 2 * 55);
}

TEST(RingBroadcastTest, EveryRankEndsWithRankZerosValues) {
  for (int n : {1, 2, 5}) {
    for (size_t length : {size_t{0}, size_t{1}, size_t{1000003}}) {
      MemoryRing ring(n);
      std::vector<std::vector<float>> data(n);
      ring.run([&](int rank) {
        data[rank] = testing::rank_values(rank, length);
        Communicator(ring.links(rank), {.max_chunk_bytes = 64 * 1024}).broadcast(data[rank]);
      });
      const auto expected = testing::rank_values(0, length);
      for (int r = 0; r < n; ++r) EXPECT_TRUE(bitwise_equal(data[r], expected)) << n << " " << r;
    }
  }
}

// Every root of every ring size: the chain starts at the root and wraps, so a root other than 0
// exercises ranks that receive from a left neighbour of higher number.
TEST(RingBroadcastTest, EveryRankEndsWithTheRootsValues) {
  for (int n : {2, 3, 5}) {
    for (int root = 0; root < n; ++root) {
      MemoryRing ring(n);
      std::vector<std::vector<float>> data(n);
      ring.run([&](int rank) {
        data[rank] = testing::rank_values(rank, 1001);
        Communicator(ring.links(rank), {.max_chunk_bytes = 256}).broadcast(data[rank], root);
      });
      const auto expected = testing::rank_values(root, 1001);
      for (int r = 0; r < n; ++r) {
        EXPECT_TRUE(bitwise_equal(data[r], expected)) << "n=" << n << " root=" << root << " " << r;
      }
    }
  }
}

TEST(RingBroadcastTest, BytesFromAnotherRootAndARootThatIsNoRank) {
  MemoryRing ring(3);
  std::vector<std::vector<std::byte>> data(3);
  ring.run([&](int rank) {
    data[rank].assign(7, static_cast<std::byte>(rank));
    Communicator(ring.links(rank)).broadcast_bytes(data[rank], 2);
  });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(data[r], std::vector<std::byte>(7, std::byte{2}));
  std::vector<float> values(4);
  EXPECT_THROW(Communicator(ring.links(0)).broadcast(values, 3), UsageError);
  EXPECT_THROW(Communicator(ring.links(0)).broadcast(values, -1), UsageError);
}

// Ranks that name different roots each sent and none received (or waited past the timeout):
// every rank now fails at once, naming each root, and the ring goes on.
TEST(RingBroadcastTest, RanksThatNameDifferentRootsAllFailNamingThemAndTheRingGoesOn) {
  MemoryRing ring(3);
  std::vector<std::string> errors(3);
  std::vector<std::vector<float>> sums(3);
  ring.run([&](int rank) {
    Communicator communicator(ring.links(rank));
    std::vector<float> values(5, static_cast<float>(rank));
    try {
      communicator.broadcast(values, rank == 2 ? 1 : 0);
    } catch (const UsageError& e) {
      errors[static_cast<size_t>(rank)] = e.what();
    }
    sums[static_cast<size_t>(rank)].assign(2, 1.0f);
    communicator.allreduce(sums[static_cast<size_t>(rank)]);
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_THAT(errors[static_cast<size_t>(r)],
                ::testing::HasSubstr("the ranks name different roots (root 0 from ranks 0 1, "
                                     "root 1 from rank 2)"))
        << r;
    EXPECT_EQ(sums[static_cast<size_t>(r)], std::vector<float>(2, 3.0f)) << r;
  }
}

// A global step past 2^53, which neither a float nor a double holds, a signalling NaN's bits and an
// odd length: every rank ends with rank 0's bytes.
TEST(RingBroadcastTest, BytesArriveBitForBitFromRankZero) {
  constexpr int64_t kStep = (int64_t{1} << 53) + 1;
  constexpr uint32_t kSignallingNan = 0x7fa00001;
  MemoryRing ring(3);
  std::vector<std::array<std::byte, 13>> data(3);
  ring.run([&](int rank) {
    std::array<std::byte, 13>& bytes = data[static_cast<size_t>(rank)];
    bytes.fill(std::byte{0x5a});
    if (rank == 0) {
      std::memcpy(bytes.data(), &kStep, sizeof kStep);
      std::memcpy(bytes.data() + 8, &kSignallingNan, sizeof kSignallingNan);
      bytes[12] = std::byte{0xff};
    }
    Communicator(ring.links(rank), {.max_chunk_bytes = 4}).broadcast_bytes(bytes);
  });
  for (int r = 1; r < 3; ++r) EXPECT_EQ(data[static_cast<size_t>(r)], data[0]) << "rank " << r;
  int64_t step = 0;
  std::memcpy(&step, data[2].data(), sizeof step);
  EXPECT_EQ(step, kStep);
  EXPECT_EQ(data[2][12], std::byte{0xff});
}

// Ranks 1..n-1 enter the barrier first; rank 0 waits until all of them are blocked in it, checks
// none has come out, and only then enters. A barrier that let anyone through early fails here.
TEST(RingBarrierTest, NoRankLeavesBeforeEveryRankHasEntered) {
  const int n = 4;
  MemoryRing ring(n);
  std::atomic<int> left_barrier = 0;
  bool any_left_early = true;
  ring.run([&](int rank) {
    Communicator communicator(ring.links(rank));
    if (rank == 0) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (ring.waiting() < n - 1 && left_barrier == 0 &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::yield();
      }
      any_left_early = left_barrier > 0;
    }
    communicator.barrier();
    ++left_barrier;
  });
  EXPECT_FALSE(any_left_early);
  EXPECT_EQ(left_barrier, n);
}

TEST(RingAllreduceTest, RanksThatDisagreeOnTheLengthAreReported) {
  MemoryRing ring(2);
  EXPECT_THROW(ring.run([&](int rank) {
    std::vector<float> data(rank == 0 ? 10 : 12, 1.0f);
    Communicator(ring.links(rank)).allreduce(data);
  }),
               CollectiveError);
}

}  // namespace
}  // namespace dtrain
