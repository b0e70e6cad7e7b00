// MemoryRing's own contract, beyond the algorithms run over it (ring_allreduce_test.cc): a failure
// anywhere stops every rank with one message, and its connectors hand out the ranks' links.
#include "collective/memory_ring.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "tensor/typed_span.h"

namespace dtrain {
namespace {

using ::testing::HasSubstr;

// What body threw on each rank ("" where nothing).
std::vector<std::string> errors_of(MemoryRing& ring, const std::function<void(int)>& body) {
  std::vector<std::string> errors(static_cast<size_t>(ring.size()));
  ring.run([&](int rank) {
    try {
      body(rank);
    } catch (const CollectiveError& error) {
      errors[static_cast<size_t>(rank)] = error.what();
    }
  });
  return errors;
}

RingOptions worker(int size, int rank) {
  RingOptions options;
  options.size = size;
  options.rank = rank;
  options.job = "worker";
  return options;
}

// Ranks 1..3 wait for a message that never comes; rank 0 aborts once all three are blocked.
TEST(MemoryRingTest, AnAbortStopsEveryWaitingRankWithItsReason) {
  // A timeout past the test's own (ctest's 300 s): a waiter that the abort did not wake would hang
  // the test rather than leave by its timeout with the abort's message.
  MemoryRing ring(4, 600'000);
  const std::vector<std::string> errors = errors_of(ring, [&](int rank) {
    RingLinks& links = ring.links(rank);
    if (rank != 0) {
      std::vector<float> mine(3);
      links.recv_left(std::span(mine), {.op = 0});
      return;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (ring.waiting() < 3 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    links.abort("rank0 stopped: disk full");
    links.abort("a second reason is not the first");
    links.wait_sent();  // throws: the ring has failed
  });
  for (const std::string& error : errors) EXPECT_EQ(error, "rank0 stopped: disk full");
}

TEST(MemoryRingTest, AWaitPastTheTimeoutFailsTheRingNamingTheSilentNeighbour) {
  MemoryRing ring(2, 100);
  std::vector<float> into(1);
  const std::vector<std::string> errors = errors_of(ring, [&](int rank) {
    if (rank == 0) ring.links(0).recv_left(std::span(into), {.op = 5});
  });
  EXPECT_THAT(errors[0], HasSubstr("lost rank1: timed out: no data for 0.1 s (seen by rank0)"));
  // A later call on another rank finds the ring failed.
  EXPECT_THROW(ring.links(1).send_right(std::span(into), {.op = 6}), CollectiveError);
}

TEST(MemoryRingTest, ConnectorsHandOutTheRanksLinksUnderTheirOptions) {
  MemoryRing ring(2);
  std::unique_ptr<RingConnector> zero = ring.connector(0);
  std::unique_ptr<RingConnector> one = ring.connector(1);
  EXPECT_THROW(ring.links(0), std::logic_error);  // handed out
  EXPECT_THROW(zero->listen(worker(2, 1)), std::invalid_argument);
  zero->listen(worker(2, 0));
  one->listen(worker(2, 1));
  const std::unique_ptr<RingLinks> a = zero->connect();
  const std::unique_ptr<RingLinks> b = one->connect();
  EXPECT_EQ(a->rank(), 0);
  EXPECT_EQ(b->rank(), 1);
  EXPECT_EQ(a->describe_link(Side::kRight), "memory");
  const std::vector<float> sent = {1.5f, -2.0f};
  a->send_right(std::span(sent), {.op = 1});
  std::vector<float> got(2);
  b->recv_left(std::span(got), {.op = 1});
  EXPECT_EQ(got, sent);
  // A message the receiver did not expect names both ranks, as the links' options name them.
  a->send_right(std::span(sent), {.op = 2});
  try {
    b->recv_left(std::span(got), {.op = 3});
    ADD_FAILURE() << "a message of another collective was taken";
  } catch (const CollectiveError& error) {
    EXPECT_THAT(error.what(), HasSubstr("worker0 sent op 2"));
    EXPECT_THAT(error.what(), HasSubstr("where worker1 expected op 3"));
  }
}

// As over TCP (tcp_ring_test.cc): ranks of another model or configuration form no ring, and every
// rank learns why, naming the one refused.
TEST(MemoryRingTest, ARankWithAnotherFingerprintIsRefusedByName) {
  MemoryRing ring(2, 20'000);
  std::vector<std::unique_ptr<RingConnector>> connectors;
  for (int r = 0; r < 2; ++r) connectors.push_back(ring.connector(r));
  const std::vector<std::string> errors = errors_of(ring, [&](int rank) {
    RingOptions options = worker(2, rank);
    options.fingerprint = rank == 1 ? 8 : 7;
    RingConnector& connector = *connectors[static_cast<size_t>(rank)];
    connector.listen(options);
    connector.connect();
  });
  // Either rank may be the first to refuse its left neighbour.
  EXPECT_THAT(errors[0], HasSubstr(" refused its left neighbour: memory (worker"));
  EXPECT_THAT(errors[0], HasSubstr(") runs another model or configuration (fingerprint "
                                   "000000000000000"));
  EXPECT_THAT(errors[0], HasSubstr("check --model and the flags that shape the parameters"));
  EXPECT_EQ(errors[1], errors[0]);
  EXPECT_FALSE(connectors[0]->has_address());
}

// A message of bfloat16 where float32 is expected, of the same length in bytes: refused naming the
// sender, the tag and both types, and the ring fails for every rank.
TEST(MemoryRingTest, AMessageOfAnotherElementTypeIsRefusedNamingBothTypes) {
  MemoryRing ring(2);
  const std::vector<std::string> errors = errors_of(ring, [&](int rank) {
    std::vector<float> data(4, 1.0f);
    RingLinks& links = ring.links(rank);
    if (rank == 0) {
      links.send_right(ConstTypedSpan(std::as_bytes(std::span(data)), ElementType::kBFloat16),
                       {.op = 2});
      links.recv_left(std::span(data), {.op = 2});  // ends with rank 1's failure
    } else {
      links.recv_left(std::span(data), {.op = 2});
    }
  });
  EXPECT_THAT(errors[1],
              HasSubstr("rank0 sent op 2 step 0 chunk 0 as bfloat16 where rank1 expected float32"));
  EXPECT_EQ(errors[0], errors[1]);
}

}  // namespace
}  // namespace dtrain
