// TcpRing over real loopback sockets, its ranks on threads of this process: correct results for
// every ring size, and every failure (a lost rank, a stuck rank, a stranger) named on every rank.
#include "collective/tcp_ring.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "base/error.h"
#include "cluster/free_ports.h"
#include "collective/communicator.h"
#include "collective/reduction_check.h"
#include "collective/ring_connector.h"
#include "comm/loopback.h"
#include "support/mailbox_pages.h"
#include "support/tamper_relay.h"
#include "tensor/typed_span.h"

namespace dtrain {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// n rings on 127.0.0.1, one per rank, formed and driven from one thread per rank.
class LoopbackRing {
 public:
  explicit LoopbackRing(int n, const std::function<void(RingOptions&)>& adjust = {}) {
    for (int r = 0; r < n; ++r) {
      RingOptions options;
      options.size = n;
      options.rank = r;
      options.bind_host = "127.0.0.1";
      options.secret = std::string(testing::kLoopbackSecret);
      options.fingerprint = 7;
      options.timeout_ms = 20'000;
      if (adjust) adjust(options);
      rings_.push_back(std::make_unique<TcpRing>(options));
    }
  }

  int size() const { return static_cast<int>(rings_.size()); }
  TcpRing& ring(int rank) { return *rings_[rank]; }
  void drop(int rank) { rings_[rank].reset(); }

  // Every rank's connect(); the errors, by rank, empty where it succeeded.
  std::vector<std::string> connect() {
    return run([&](int rank) {
      ring(rank).connect({"127.0.0.1", ring((rank + 1) % size()).port()});
    });
  }

  // Runs body(rank) on one thread per rank; returns what each threw ("" where nothing).
  std::vector<std::string> run(const std::function<void(int rank)>& body) {
    std::vector<std::string> errors(rings_.size());
    std::vector<std::jthread> threads;
    for (int r = 0; r < size(); ++r) {
      threads.emplace_back([&, r] {
        try {
          body(r);
        } catch (const std::exception& error) {
          errors[r] = error.what();
          if (errors[r].empty()) errors[r] = "(empty message)";
        }
      });
    }
    threads.clear();  // joins
    return errors;
  }

 private:
  std::vector<std::unique_ptr<TcpRing>> rings_;
};

void expect_no_errors(const std::vector<std::string>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// Sets every rank's transport.
std::function<void(RingOptions&)> over(Transport transport) {
  return [transport](RingOptions& options) { options.transport = transport; };
}

// The ranks of this process can read each other's memory, so kAuto moves chunks by reference,
// announced through a shared mailbox, and kTcp over the sockets.
void expect_links(LoopbackRing& group, Transport transport) {
  if (group.size() == 1) return;
  for (int r = 0; r < group.size(); ++r) {
    for (const Side side : {Side::kLeft, Side::kRight}) {
      EXPECT_EQ(group.ring(r).reads_memory(side), transport != Transport::kTcp) << "rank " << r;
      EXPECT_EQ(group.ring(r).shares_mailbox(side), transport != Transport::kTcp) << "rank " << r;
    }
  }
}

void expect_allreduce_matches_double_precision(int n, AllreduceAlgorithm algorithm,
                                               Transport transport) {
  LoopbackRing group(n, over(transport));
  ASSERT_NO_FATAL_FAILURE(expect_no_errors(group.connect()));
  expect_links(group, transport);
  const std::vector<size_t> lengths = {0, 1, size_t(n - 1), size_t(n + 1), 1000003};
  std::vector<std::vector<std::vector<float>>> results(lengths.size(),
                                                       std::vector<std::vector<float>>(n));
  expect_no_errors(group.run([&](int rank) {
    // One sequence of collectives per rank.
    Communicator communicator(group.ring(rank), {.algorithm = algorithm});
    for (size_t i = 0; i < lengths.size(); ++i) {
      results[i][rank] = testing::rank_values(rank, lengths[i]);
      communicator.allreduce(results[i][rank]);
    }
  }));
  for (size_t i = 0; i < lengths.size(); ++i) {
    const auto exact = testing::exact_sum(n, lengths[i]);
    const std::string where = "n=" + std::to_string(n) + " length=" + std::to_string(lengths[i]);
    for (int r = 0; r < n; ++r) {
      testing::expect_matches_sum(results[i][r], exact, n, 1.0, where.c_str());
      EXPECT_EQ(results[i][r], results[i][0]) << where << ": rank " << r << " differs";
    }
  }
}

// Every test of results runs over both ways of moving chunks.
class TcpRingTransportTest : public ::testing::TestWithParam<Transport> {};

TEST_P(TcpRingTransportTest, AllreduceMatchesDoublePrecisionForEveryRingSizeAndLength) {
  for (int n = 1; n <= 6; ++n) {
    SCOPED_TRACE("ring, n=" + std::to_string(n));
    expect_allreduce_matches_double_precision(n, AllreduceAlgorithm::kRing, GetParam());
  }
}

TEST_P(TcpRingTransportTest, HalvingDoublingMatchesDoublePrecisionForEveryLength) {
  expect_allreduce_matches_double_precision(4, AllreduceAlgorithm::kHalvingDoubling, GetParam());
}

// Ranks that sleep as soon as they wait depend on their neighbours to wake them: through a
// mailbox, by the keepalive a neighbour sends when it posts to a rank that said it sleeps.
TEST_P(TcpRingTransportTest, RanksThatSleepAtOnceAreWokenForEveryChunk) {
  constexpr int kRanks = 3;
  LoopbackRing group(kRanks, [](RingOptions& options) {
    options.transport = GetParam();
    options.spin_us = 0;
  });
  ASSERT_NO_FATAL_FAILURE(expect_no_errors(group.connect()));
  expect_links(group, GetParam());
  constexpr size_t kLength = 3001;
  std::vector<std::vector<float>> results(kRanks);
  expect_no_errors(group.run([&](int rank) {
    Communicator communicator(group.ring(rank), {.algorithm = AllreduceAlgorithm::kRing});
    for (int i = 0; i < 200; ++i) {
      results[rank] = testing::rank_values(rank, kLength);
      communicator.allreduce(results[rank]);
    }
  }));
  const auto exact = testing::exact_sum(kRanks, kLength);
  for (int r = 0; r < kRanks; ++r) testing::expect_matches_sum(results[r], exact, kRanks, 1.0, "");
}

// What a strategy does: connect_ring() with each rank's own port and its right neighbour's, and
// nothing but RingLinks afterwards.
TEST(TcpRingTest, ConnectRingFormsTheRingFromItsOptionsAlone) {
  const int n = 3;
  const std::vector<uint16_t> ports = pick_free_ports(n);
  std::vector<std::vector<float>> results(n);
  std::vector<std::string> links(n);
  std::vector<std::jthread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      RingOptions options;
      options.size = n;
      options.rank = r;
      options.bind_host = "127.0.0.1";
      options.port = ports[static_cast<size_t>(r)];
      options.right = {"127.0.0.1", ports[static_cast<size_t>((r + 1) % n)]};
      options.secret = std::string(testing::kLoopbackSecret);
      options.timeout_ms = 20'000;
      options.transport = Transport::kTcp;
      options.tcp_congestion = "reno";  // in every kernel; the host's default is not
      try {
        const std::unique_ptr<RingLinks> ring = connect_ring(options);
        results[static_cast<size_t>(r)] = testing::rank_values(r, 1001);
        Communicator(*ring).allreduce(results[static_cast<size_t>(r)]);
        links[static_cast<size_t>(r)] =
            ring->describe_link(Side::kLeft) + "/" + ring->describe_link(Side::kRight);
      } catch (const std::exception& error) {
        links[static_cast<size_t>(r)] = error.what();
      }
    });
  }
  threads.clear();  // joins
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(links[static_cast<size_t>(r)],
              "tcp (congestion control reno)/tcp (congestion control reno)")
        << "rank " << r;
    testing::expect_matches_sum(results[static_cast<size_t>(r)], testing::exact_sum(n, 1001), n,
                                1.0, "connect_ring");
  }
}

// A neighbour that scribbles over the mailbox the ranks share (here every mailbox of the ring,
// between two collectives) is caught as a malformed frame would be: each rank stops with an error
// naming the neighbour whose counters make no sense, instead of reading from wherever they point;
// and each tells both neighbours, rather than one side waiting out the timeout: a rank that did
// would end "timed out" after 60 s, not naming the corruption, so the errors say which.
TEST(TcpRingTest, AMailboxScribbledOverStopsEveryRankNamingTheNeighbour) {
  constexpr int kRanks = 3;
  constexpr auto kTimeout = std::chrono::seconds(60);
  LoopbackRing group(kRanks, [&](RingOptions& options) {
    options.transport = Transport::kAuto;
    options.timeout_ms = static_cast<int>(std::chrono::milliseconds(kTimeout).count());
  });
  ASSERT_NO_FATAL_FAILURE(expect_no_errors(group.connect()));
  expect_links(group, Transport::kAuto);
  // Each link's creator holds its page open as a memfd; the test maps each and overwrites all but
  // the first line (the magic number) with ones, as a peer could in its own mapping.
  ASSERT_EQ(testing::scribble_over_mailboxes(), kRanks);
  const auto errors = group.run([&](int rank) {
    std::vector<float> data = testing::rank_values(rank, 100'000);
    Communicator(group.ring(rank), {.algorithm = AllreduceAlgorithm::kRing}).allreduce(data);
  });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_THAT(errors[r], ::testing::ContainsRegex(
                               "worker[0-2] corrupted the mailbox it shares with this task"))
        << "rank " << r;
  }
}

TEST_P(TcpRingTransportTest, BroadcastBarrierAndAllreduceShareTheConnections) {
  LoopbackRing group(3, over(GetParam()));
  ASSERT_NO_FATAL_FAILURE(expect_no_errors(group.connect()));
  std::vector<std::vector<float>> params(3), averaged(3);
  expect_no_errors(group.run([&](int rank) {
    Communicator communicator(group.ring(rank), {.max_chunk_bytes = 4096});
    params[rank] = testing::rank_values(rank, 10'000);
    communicator.broadcast(params[rank]);
    communicator.barrier();
    averaged[rank] = testing::rank_values(rank, 999);
    communicator.allreduce(averaged[rank], ReduceOp::kAverage);
  }));
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(params[r], testing::rank_values(0, 10'000)) << "rank " << r;
    testing::expect_matches_sum(averaged[r], testing::exact_sum(3, 999), 3, 1.0 / 3, "average");
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, TcpRingTransportTest,
                         ::testing::Values(Transport::kTcp, Transport::kAuto),
                         [](const auto& info) {
                           return info.param == Transport::kTcp ? "Tcp" : "Memory";
                         });

// The failure tests run under both algorithms of a ring of four: halving-doubling sends both ways
// on each link, so aborts and keepalives must travel both ways too. And under both transports: a
// chunk moved by reference leaves the bytes out of the frames, not the frames themselves.
class TcpRingFailureTest
    : public ::testing::TestWithParam<std::tuple<AllreduceAlgorithm, Transport>> {
 protected:
  AllreduceAlgorithm algorithm() const { return std::get<0>(GetParam()); }
  std::function<void(RingOptions&)> transport() const { return over(std::get<1>(GetParam())); }
};

// Rank 2 goes away (its sockets close, as when its process is killed) while the others are in an
// all-reduce: every one of them stops, and every message names worker2, including those of ranks
// that are not its neighbours and learn it from the abort passed around the ring.
TEST_P(TcpRingFailureTest, LostRankStopsEveryOtherRankNamingIt) {
  LoopbackRing group(4, transport());
  ASSERT_NO_FATAL_FAILURE(expect_no_errors(group.connect()));
  const auto errors = group.run([&](int rank) {
    if (rank == 2) {
      group.drop(2);
      return;
    }
    std::vector<float> data = testing::rank_values(rank, 4'000'000);
    Communicator(group.ring(rank), {.algorithm = algorithm()}).allreduce(data);
  });
  for (int r : {0, 1, 3}) {
    EXPECT_THAT(errors[r], HasSubstr("lost worker2")) << "rank " << r;
  }
}

// Rank 2 is connected but never takes part (a hung process): its right neighbour gives up after
// the timeout, and the abort carries its name to the others.
TEST_P(TcpRingFailureTest, StuckRankIsNamedAfterTheTimeout) {
  LoopbackRing group(4, [&](RingOptions& options) {
    transport()(options);
    options.timeout_ms = 1'000;
  });
  ASSERT_NO_FATAL_FAILURE(expect_no_errors(group.connect()));
  std::latch others_done(3);
  const auto errors = group.run([&](int rank) {
    if (rank == 2) {
      others_done.wait();
      return;
    }
    try {
      std::vector<float> data = testing::rank_values(rank, 4'000'000);
      Communicator(group.ring(rank), {.algorithm = algorithm()}).allreduce(data);
    } catch (...) {
      others_done.count_down();
      throw;
    }
    others_done.count_down();
  });
  for (int r : {0, 1, 3}) {
    EXPECT_THAT(errors[r], HasSubstr("lost worker2: timed out")) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Algorithms, TcpRingFailureTest,
                         ::testing::Combine(::testing::Values(AllreduceAlgorithm::kRing,
                                                              AllreduceAlgorithm::kHalvingDoubling),
                                            ::testing::Values(Transport::kTcp, Transport::kAuto)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) == AllreduceAlgorithm::kRing
                                                  ? "Ring"
                                                  : "HalvingDoubling") +
                                  (std::get<1>(info.param) == Transport::kTcp ? "Tcp" : "Memory");
                         });

// A rank started with --transport tcp cannot join a neighbour that requires memory, and both say
// why, naming the flag.
TEST(TcpRingTest, ShmRankRefusesANeighbourOnTcpNamingTheFlag) {
  LoopbackRing group(2, [](RingOptions& options) {
    options.transport = options.rank == 0 ? Transport::kShm : Transport::kTcp;
    options.timeout_ms = 5'000;
  });
  const auto errors = group.connect();
  EXPECT_THAT(errors[0], HasSubstr("--transport shm: worker0 and worker1 cannot move payloads"));
  EXPECT_THAT(errors[0], HasSubstr("worker1 was started with --transport tcp"));
  EXPECT_THAT(errors[1], HasSubstr("refused worker1: --transport shm"));
}

// Rank 0 finishes and leaves while rank 2 still waits for its last chunk from rank 1: a neighbour
// that closed once it owed nothing is no failure, under either transport.
TEST_P(TcpRingTransportTest, ANeighbourThatLeftOwingNothingIsNotALoss) {
  LoopbackRing group(3, over(GetParam()));
  ASSERT_NO_FATAL_FAILURE(expect_no_errors(group.connect()));
  std::latch rank0_gone(1);
  const ChunkTag tag{0, 0, 0};
  std::vector<float> data[3];
  const auto errors = group.run([&](int rank) {
    data[rank] = testing::rank_values(rank, 100'000);
    RingLinks& links = group.ring(rank);
    if (rank == 0) {  // sends right, needs nothing back, and leaves
      links.send_right(std::span(data[0]), tag);
      links.wait_sent();
      group.drop(0);
      rank0_gone.count_down();
    } else if (rank == 1) {  // passes rank 0's values on only once rank 0 has gone
      links.recv_left(std::span(data[1]), tag);
      rank0_gone.wait();
      links.send_right(std::span(data[1]), tag);
      links.wait_sent();
    } else {  // waits on rank 1 while its right neighbour, rank 0, closes
      links.recv_left(std::span(data[2]), tag);
    }
  });
  expect_no_errors(errors);
  EXPECT_EQ(data[2], testing::rank_values(0, 100'000));
}

// Rank 0 sends a chunk of bfloat16 where rank 1 expects float32 of the same length in bytes: rank 1
// refuses it naming rank 0, the chunk and both types, and rank 0 stops with the same message.
TEST_P(TcpRingTransportTest, AChunkOfAnotherElementTypeIsRefusedNamingBothTypes) {
  LoopbackRing group(2, over(GetParam()));
  ASSERT_NO_FATAL_FAILURE(expect_no_errors(group.connect()));
  const ChunkTag tag{3, 1, 0};
  const auto errors = group.run([&](int rank) {
    RingLinks& links = group.ring(rank);
    std::vector<float> data(8, 1.0f);
    if (rank == 0) {
      links.send_right(ConstTypedSpan(std::as_bytes(std::span(data)), ElementType::kBFloat16), tag);
      links.recv_left(std::span(data), tag);  // rank 1's abort ends this wait
    } else {
      links.recv_left(std::span(data), tag);
    }
  });
  EXPECT_THAT(errors[1], HasSubstr("sent op 3 step 1 chunk 0 as bfloat16 where worker1 expected "
                                   "float32"));
  EXPECT_THAT(errors[1], HasSubstr("worker0"));
  EXPECT_EQ(errors[0], errors[1]);
}

TEST(TcpRingTest, RankWithAnotherFingerprintIsRefusedByName) {
  LoopbackRing group(2, [](RingOptions& options) {
    if (options.rank == 1) options.fingerprint = 8;
    options.timeout_ms = 5'000;
  });
  for (const std::string& error : group.connect()) {
    EXPECT_THAT(error, HasSubstr("refused"));
    EXPECT_THAT(error, HasSubstr("another model or configuration"));
  }
}

// Worker 0's right neighbour never comes up, and the only peer that did come was refused: the
// error says so, since that refused worker is usually the one missing.
// A relay without the secret between two ranks turns a chunk into an abort carrying its own text:
// the forged frame fails the tag over its header and meta, so no rank stops for the reason it
// gives or prints it; the ring stops on the integrity failure, named.
TEST(TcpRingTest, AForgedAbortIsCaughtByItsTagAndItsTextNeverShown) {
  LoopbackRing group(2, over(Transport::kTcp));
  testing::TamperRelay relay(group.ring(1).port(), testing::Attack::kForgeRingAbort);
  expect_no_errors(group.run([&](int rank) {
    const uint16_t right = rank == 0 ? relay.port() : group.ring(0).port();
    group.ring(rank).connect({"127.0.0.1", right});
  }));
  const auto errors = group.run([&](int rank) {
    Communicator communicator(group.ring(rank), {});
    for (int i = 0; i < 20; ++i) {
      std::vector<float> data = testing::rank_values(rank, 1'000'000);
      communicator.allreduce(data);
    }
  });
  EXPECT_EQ(relay.frames_tampered(), 1);
  EXPECT_THAT(errors[1],
              HasSubstr("failed authentication (its header and meta, claiming type 44)"));
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[r], "") << "rank " << r;
    EXPECT_THAT(errors[r], Not(HasSubstr("forged abort"))) << "rank " << r;
  }
}

TEST(TcpRingTest, RingThatCannotFormMentionsThePeerItRefused) {
  LoopbackRing group(2, [](RingOptions& options) {
    if (options.rank == 1) options.fingerprint = 8;
    options.timeout_ms = 2'000;
  });
  const uint16_t nobody = pick_free_ports(1)[0];
  const auto errors = group.run([&](int rank) {
    const uint16_t right = rank == 0 ? nobody : group.ring(0).port();
    group.ring(rank).connect({"127.0.0.1", right});
  });
  EXPECT_THAT(errors[1], HasSubstr("refused worker1"));
  // No ring can form with a neighbour of another model: worker 0 ends at once, saying why, rather
  // than waiting out its timeout for a right neighbour that is not there.
  EXPECT_THAT(errors[0], HasSubstr("worker0 refused its left neighbour: 127.0.0.1:"));
  EXPECT_THAT(errors[0], HasSubstr("(worker1) runs another model or configuration"));
}

TEST(TcpRingTest, RankWithAnotherSecretFailsAuthentication) {
  testing::LogCapture log;  // the refused handshakes are logged, not printed
  LoopbackRing group(2, [](RingOptions& options) {
    if (options.rank == 1) options.secret = "not the cluster secret";
    options.timeout_ms = 5'000;
  });
  for (const std::string& error : group.connect()) EXPECT_THAT(error, HasSubstr("secret"));
}

}  // namespace
}  // namespace dtrain
