// The rendezvous over real loopback sockets, each rank on a thread of its own: every rank learns
// every rank's address, and a missing rank, a rank claimed twice or a wrong secret ends every rank
// that took part with one error naming the culprit.
#include "cluster/rendezvous.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <vector>

#include "base/error.h"
#include "cluster/free_ports.h"

namespace dtrain {
namespace {

using ::testing::HasSubstr;

constexpr std::string_view kRendezvousSecret = "rendezvous test secret, 32 bytes";

RendezvousOptions options_for(uint16_t port, int rank, int world_size, int timeout_ms = 20'000) {
  RendezvousOptions o;
  o.address = HostPort{"127.0.0.1", port};
  o.source = "the test";
  o.rank = rank;
  o.world_size = world_size;
  o.secret = std::string(kRendezvousSecret);
  o.timeout_ms = timeout_ms;
  return o;
}

// Each rank's outcome: its list of addresses, or the message it ended with.
struct Outcome {
  std::vector<HostPort> ranks;
  std::string error;
};

std::future<Outcome> start_rank(RendezvousOptions o) {
  return std::async(std::launch::async, [o] {
    try {
      return Outcome{rendezvous(o), ""};
    } catch (const Error& error) {
      return Outcome{{}, error.what()};
    }
  });
}

TEST(Rendezvous, EveryRankLearnsEveryRanksAddressInRankOrder) {
  const uint16_t port = pick_free_ports(1)[0];
  std::vector<std::future<Outcome>> ranks;
  // Rank 0 last: the others retry until it listens.
  for (int r : {2, 1, 0}) ranks.push_back(start_rank(options_for(port, r, 3)));
  std::vector<Outcome> outcomes;
  for (auto& f : ranks) outcomes.push_back(f.get());
  for (const Outcome& o : outcomes) {
    ASSERT_EQ(o.error, "");
    ASSERT_EQ(o.ranks.size(), 3u);
    EXPECT_EQ(o.ranks, outcomes[0].ranks) << "every rank has the same list";
  }
  const auto& list = outcomes[0].ranks;
  EXPECT_EQ(list[0].host, "127.0.0.1") << "rank 0 is at the rendezvous host";
  for (const HostPort& r : list) {
    EXPECT_EQ(r.host, "127.0.0.1") << "the address each rank reaches rank 0 from";
    EXPECT_GT(r.port, 0);
  }
  EXPECT_NE(list[0].port, list[1].port);
  EXPECT_NE(list[1].port, list[2].port);
  EXPECT_EQ(ranks_on_host_of(list, 1), 3);
}

// Ranks that reach rank 0 through its name register the address it resolved to; rank 0 must
// register that address too, or the host's ranks would not count as sharing its cores.
TEST(Rendezvous, RanksOfOneHostCountAsOneHostWhenRankZeroIsGivenByName) {
  const uint16_t port = pick_free_ports(1)[0];
  std::vector<std::future<Outcome>> ranks;
  for (int r : {1, 0}) {
    RendezvousOptions o = options_for(port, r, 2);
    o.address.host = "localhost";
    ranks.push_back(start_rank(o));
  }
  const Outcome one = ranks[0].get();
  ASSERT_EQ(ranks[1].get().error, "");
  ASSERT_EQ(one.error, "");
  EXPECT_EQ(one.ranks[0].host, one.ranks[1].host);
  EXPECT_EQ(ranks_on_host_of(one.ranks, 0), 2);
}

TEST(Rendezvous, ARankThatNeverRegistersEndsEveryOtherNamingIt) {
  const uint16_t port = pick_free_ports(1)[0];
  auto rank0 = start_rank(options_for(port, 0, 3, 1'500));
  auto rank1 = start_rank(options_for(port, 1, 3, 1'500));
  for (Outcome o : {rank0.get(), rank1.get()}) {
    EXPECT_THAT(o.error, HasSubstr("rank(s) 2 did not register within 1 s (--peer_timeout)"));
  }
}

TEST(Rendezvous, ARankClaimedTwiceEndsEveryRankNamingBothClaims) {
  const uint16_t port = pick_free_ports(1)[0];
  auto rank0 = start_rank(options_for(port, 0, 3));
  auto first = start_rank(options_for(port, 1, 3));
  auto second = start_rank(options_for(port, 1, 3));
  for (Outcome o : {rank0.get(), first.get(), second.get()}) {
    EXPECT_THAT(o.error, HasSubstr("rank 1 was claimed twice: from 127.0.0.1:"));
  }
}

TEST(Rendezvous, ARankWithAnotherWorldSizeEndsEveryRankSayingBoth) {
  const uint16_t port = pick_free_ports(1)[0];
  auto rank0 = start_rank(options_for(port, 0, 2));
  auto rank1 = start_rank(options_for(port, 1, 3));
  for (Outcome o : {rank0.get(), rank1.get()}) {
    EXPECT_THAT(o.error, HasSubstr("was started for a world of 3 tasks, rank 0 for 2"));
  }
}

TEST(Rendezvous, AWrongSecretFailsThatRanksHandshakeAndTheOthersNameTheMissingRank) {
  const uint16_t port = pick_free_ports(1)[0];
  auto rank0 = start_rank(options_for(port, 0, 2, 2'000));
  RendezvousOptions stranger = options_for(port, 1, 2, 2'000);
  stranger.secret = "another secret of thirty-two byte";
  const Outcome intruder = start_rank(stranger).get();
  EXPECT_THAT(intruder.error, HasSubstr("rendezvous"));
  const Outcome zero = rank0.get();
  EXPECT_THAT(zero.error, HasSubstr("rank(s) 1 did not register"));
  EXPECT_THAT(zero.error,
              HasSubstr("meanwhile 1 connection(s) rejected (1 failed authentication)"));
}

TEST(Rendezvous, RolesPutThePsTasksFirstAndTheChiefAfterThem) {
  const std::vector<HostPort> ranks = {{"a", 1}, {"b", 2}, {"c", 3}};
  const ClusterConfig ps_rank = cluster_of_ranks(ranks, 0, 1);
  EXPECT_EQ(ps_rank.task, (TaskId{"ps", 0}));
  EXPECT_EQ(ps_rank.cluster.tasks("ps"), (std::vector<HostPort>{{"a", 1}}));
  EXPECT_EQ(ps_rank.cluster.tasks("worker"), (std::vector<HostPort>{{"b", 2}, {"c", 3}}));
  const ClusterConfig chief = cluster_of_ranks(ranks, 1, 1);
  EXPECT_EQ(chief.task, (TaskId{"worker", 0}));
  EXPECT_TRUE(is_chief(chief.cluster, chief.task));
  const ClusterConfig ring = cluster_of_ranks(ranks, 2, 0);
  EXPECT_EQ(ring.task, (TaskId{"worker", 2}));
  EXPECT_FALSE(ring.cluster.has_job("ps"));
}

}  // namespace
}  // namespace dtrain
