// The intra-op thread team and the products split over it.
#include "tensor/thread_team.h"

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "tensor/blas.h"

namespace dtrain {
namespace {

TEST(ThreadTeamTest, RunsEveryPartOnceOnDistinctThreads) {
  ThreadTeam team(3);
  for (int round = 0; round < 100; ++round) {
    std::vector<std::thread::id> ran_on(3);
    std::atomic<int> calls{0};
    team.run([&](int part) {
      ran_on.at(part) = std::this_thread::get_id();
      ++calls;
    });
    EXPECT_EQ(calls.load(), 3);
    EXPECT_EQ(ran_on[0], std::this_thread::get_id());  // part 0 runs in the caller
    EXPECT_NE(ran_on[1], ran_on[0]);
    EXPECT_NE(ran_on[2], ran_on[1]);
  }
}

// A product whose exact value is a denormal: 1e-20 · 1e-20 = 1e-40 < FLT_MIN. volatile keeps the
// compiler from folding it at build time, so the CPU's flags decide.
float denormal_product() {
  volatile float a = 1e-20f;
  volatile float b = 1e-20f;
  return a * b;
}

TEST(ThreadTeamTest, EveryPartFlushesDenormalsToZeroAndTheCallerGetsItsFlagsBack) {
  ASSERT_GT(denormal_product(), 0.0f) << "the test thread starts without flushing";
  ThreadTeam team(3);
  std::vector<float> seen(3, -1.0f);
  {
    ScopedTeam scope(&team);
    team.run([&](int p) { seen[p] = denormal_product(); });
  }
  EXPECT_EQ(seen, std::vector<float>(3, 0.0f));
  EXPECT_GT(denormal_product(), 0.0f) << "the guard restores the caller's flags";
}

TEST(ThreadTeamTest, RethrowsAWorkersExceptionAndStaysUsable) {
  ThreadTeam team(2);
  EXPECT_THROW(team.run([](int part) {
    if (part == 1) throw std::runtime_error("part 1 failed");
  }),
               std::runtime_error);
  std::atomic<int> calls{0};
  team.run([&](int) { ++calls; });
  EXPECT_EQ(calls.load(), 2);
}

TEST(ThreadTeamTest, ParallelRangesCoverEveryIndexOnceOnAlignedBoundaries) {
  ThreadTeam team(2);
  ScopedTeam scope(&team);
  ASSERT_EQ(parallel_parts(), 2);
  for (size_t n : {0u, 1u, 15u, 16u, 17u, 1000u, 100003u}) {
    std::vector<int> hits(n, 0);
    parallel_ranges(n, 16, [&](int part, size_t begin, size_t end) {
      EXPECT_TRUE(part == 0 || begin % 16 == 0) << "part " << part << " begins at " << begin;
      for (size_t i = begin; i < end; ++i) ++hits[i];
    });
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i], 1) << "n " << n << " index " << i;
  }
}

TEST(ThreadTeamTest, ScopedTeamRestoresThePreviousTeam) {
  ThreadTeam outer(2), inner(3);
  EXPECT_EQ(ThreadTeam::current(), nullptr);
  {
    ScopedTeam a(&outer);
    {
      ScopedTeam b(&inner);
      EXPECT_EQ(parallel_parts(), 3);
    }
    EXPECT_EQ(ThreadTeam::current(), &outer);
  }
  EXPECT_EQ(parallel_parts(), 1);
}

struct GemmCase {
  Trans ta, tb;
  int m, n, k;
};

// A split product must equal the serial one: each element is the same dot product, computed by
// the same kernel on a narrower panel, so only summation order inside BLAS could differ.
class SplitGemmTest : public ::testing::TestWithParam<GemmCase> {};

TEST_P(SplitGemmTest, EqualsTheSerialProduct) {
  const GemmCase c = GetParam();
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a(size_t(c.m) * c.k), b(size_t(c.k) * c.n), serial(size_t(c.m) * c.n);
  for (float& x : a) x = dist(rng);
  for (float& x : b) x = dist(rng);
  for (float& x : serial) x = dist(rng);
  std::vector<float> split = serial;  // beta = 1 also checks that C's old values are kept
  const int lda = c.ta == Trans::kNo ? c.k : c.m, ldb = c.tb == Trans::kNo ? c.n : c.k;
  gemm(c.ta, c.tb, c.m, c.n, c.k, 0.5f, a.data(), lda, b.data(), ldb, 1.0f, serial.data(), c.n);
  ThreadTeam team(2);
  ScopedTeam scope(&team);
  gemm(c.ta, c.tb, c.m, c.n, c.k, 0.5f, a.data(), lda, b.data(), ldb, 1.0f, split.data(), c.n);
  for (size_t i = 0; i < serial.size(); ++i)
    ASSERT_NEAR(split[i], serial[i], 1e-4f * (1.0f + std::abs(serial[i]))) << "element " << i;
}

INSTANTIATE_TEST_SUITE_P(Shapes, SplitGemmTest,
                         ::testing::Values(GemmCase{Trans::kNo, Trans::kNo, 100, 500, 784},
                                           GemmCase{Trans::kYes, Trans::kNo, 784, 500, 100},
                                           GemmCase{Trans::kNo, Trans::kYes, 100, 784, 500},
                                           GemmCase{Trans::kNo, Trans::kNo, 3000, 40, 200},
                                           GemmCase{Trans::kYes, Trans::kYes, 301, 70, 99}));

}  // namespace
}  // namespace dtrain
