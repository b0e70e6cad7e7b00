// The ring all-gather and the byte all-gather over in-memory links: every rank's result bit for bit
// against the concatenation of every rank's input, for ring sizes, awkward lengths and chunk sizes;
// its message count; and a length the ranks disagree on.
#include "collective/ring_allgather.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "collective/communicator.h"
#include "collective/memory_ring.h"
#include "collective/reduction_check.h"

namespace dtrain {
namespace {

std::vector<float> concatenation(int n, size_t block) {
  std::vector<float> all;
  for (int r = 0; r < n; ++r) {
    const std::vector<float> values = testing::rank_values(r, block);
    all.insert(all.end(), values.begin(), values.end());
  }
  return all;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

TEST(RingAllgatherTest, EveryRankEndsWithEveryBlockInRankOrder) {
  for (int n = 1; n <= 5; ++n) {
    for (size_t block : {size_t{0}, size_t{1}, size_t{7}, size_t{100003}}) {
      for (size_t chunk_bytes : {size_t{4}, size_t{64 * 1024}}) {
        if (chunk_bytes == 4 && block > 7) continue;  // a message per float: slow, and no news
        MemoryRing ring(n);
        std::vector<std::vector<float>> results(n);
        ring.run([&](int rank) {
          const std::vector<float> mine = testing::rank_values(rank, block);
          results[rank].assign(block * n, -7.0f);
          Communicator(ring.links(rank), {.max_chunk_bytes = chunk_bytes})
              .allgather(mine, results[rank]);
        });
        const std::vector<float> expected = concatenation(n, block);
        for (int r = 0; r < n; ++r) {
          EXPECT_TRUE(same_bits(results[r], expected))
              << "n=" << n << " block=" << block << " chunk_bytes=" << chunk_bytes << " rank " << r;
        }
      }
    }
  }
}

TEST(RingAllgatherTest, InPlaceWhenTheInputIsTheRanksOwnBlock) {
  const int n = 3;
  const size_t block = 1001;
  MemoryRing ring(n);
  std::vector<std::vector<float>> results(n);
  ring.run([&](int rank) {
    results[rank].assign(block * n, 0.0f);
    const std::vector<float> mine = testing::rank_values(rank, block);
    std::copy(mine.begin(), mine.end(), results[rank].begin() + rank * block);
    std::span<float> all(results[rank]);
    Communicator(ring.links(rank)).allgather(all.subspan(rank * block, block), all);
  });
  for (int r = 0; r < n; ++r) EXPECT_TRUE(same_bits(results[r], concatenation(n, block)));
}

// n-1 steps in which each of the n ranks sends one message per chunk: the (n-1)/n of the result
// that a rank lacks, and nothing more.
TEST(RingAllgatherTest, EachRankSendsNMinusOneBlocks) {
  MemoryRing ring(4);
  ring.run([&](int rank) {
    std::vector<float> mine(1000, static_cast<float>(rank));
    std::vector<float> all(4000);
    Communicator(ring.links(rank), {.max_chunk_bytes = 250 * sizeof(float)}).allgather(mine, all);
  });
  EXPECT_EQ(ring.messages(), 3 * 4 * 4);  // 3 steps, 4 ranks, 4 chunks of 250 floats
  EXPECT_EQ(ring.floats_sent(), 3 * 4 * 1000);
}

// int64 values past 2^53 and an odd byte count (packed), and whole floats in place: rank r's bytes
// land at r * length in every rank's output.
TEST(RingAllgatherTest, BytesArriveBitForBit) {
  for (size_t length : {size_t{13}, size_t{16}}) {
    const int n = 3;
    MemoryRing ring(n);
    std::vector<std::vector<std::byte>> results(n);
    auto bytes_of_rank = [&](int rank) {
      std::vector<std::byte> bytes(length, std::byte{0x5a});
      const int64_t value = (int64_t{1} << 53) + rank;
      std::memcpy(bytes.data(), &value, sizeof value);
      bytes.back() = static_cast<std::byte>(0xf0 + rank);
      return bytes;
    };
    ring.run([&](int rank) {
      const std::vector<std::byte> mine = bytes_of_rank(rank);
      results[rank].assign(length * n, std::byte{0});
      Communicator(ring.links(rank), {.max_chunk_bytes = 4}).allgather_bytes(mine, results[rank]);
    });
    std::vector<std::byte> expected;
    for (int r = 0; r < n; ++r) {
      const std::vector<std::byte> bytes = bytes_of_rank(r);
      expected.insert(expected.end(), bytes.begin(), bytes.end());
    }
    for (int r = 0; r < n; ++r) EXPECT_EQ(results[r], expected) << "length " << length;
  }
}

TEST(RingAllgatherTest, AnOutputOfTheWrongSizeIsRefused) {
  MemoryRing ring(2);
  std::vector<float> mine(3);
  std::vector<float> all(5);
  try {
    Communicator(ring.links(0)).allgather(mine, all);
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("2 ranks of 3 floats need 6"), std::string::npos)
        << e.what();
  }
}

TEST(RingAllgatherTest, RanksThatDisagreeOnTheLengthAreReported) {
  MemoryRing ring(2);
  EXPECT_THROW(ring.run([&](int rank) {
    std::vector<float> mine(rank == 0 ? 10 : 12, 1.0f);
    std::vector<float> all(mine.size() * 2);
    Communicator(ring.links(rank)).allgather(mine, all);
  }),
               CollectiveError);
}

}  // namespace
}  // namespace dtrain
