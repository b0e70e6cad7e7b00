// RankGroup: ranks as threads of this process that form a real ring on loopback, their addresses
// exchanged through a board in memory (as a torch Store or dtrain's rendezvous would carry them).
#include "collective/rank_group.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "collective/reduction_check.h"

namespace dtrain {
namespace {

constexpr char kGroupSecret[] = "rank-group-test-secret-0123456789";

// Every rank posts its address and waits until every rank has.
class AddressBoard {
 public:
  explicit AddressBoard(int n) : addresses_(n) {}

  AddressExchange for_rank(int rank) {
    return [this, rank](const HostPort& listening) {
      std::unique_lock lock(mutex_);
      addresses_[rank] = listening;
      ++posted_;
      changed_.notify_all();
      changed_.wait_for(lock, std::chrono::seconds(30),
                        [&] { return posted_ == static_cast<int>(addresses_.size()); });
      return addresses_;
    };
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<HostPort> addresses_;
  int posted_ = 0;
};

RankGroupOptions options_for(int rank, int n) {
  RankGroupOptions options;
  options.rank = rank;
  options.world_size = n;
  options.secret = kGroupSecret;
  options.timeout_ms = 20'000;
  options.ranks_on_host = n;
  return options;
}

// Runs body(group) on n threads, each in a group formed through one board.
void run_group(int n, const std::function<void(RankGroup&)>& body) {
  AddressBoard board(n);
  std::vector<std::exception_ptr> errors(n);
  {
    std::vector<std::jthread> threads;
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        try {
          RankGroup group(options_for(r, n), {"127.0.0.1", 0}, board.for_rank(r));
          body(group);
        } catch (...) {
          errors[r] = std::current_exception();
        }
      });
    }
  }
  for (const std::exception_ptr& error : errors)
    if (error) std::rethrow_exception(error);
}

TEST(RankGroupTest, ThreeRanksFormARingAndRunEveryCollective) {
  const int n = 3;
  std::vector<std::vector<float>> sums(n), broadcasts(n), gathered(n);
  std::vector<std::string> descriptions(n);
  run_group(n, [&](RankGroup& group) {
    const int r = group.rank();
    EXPECT_EQ(group.size(), n);
    sums[r] = testing::rank_values(r, 1001);
    group.communicator().allreduce(sums[r]);
    broadcasts[r] = testing::rank_values(r, 17);
    group.communicator().broadcast(broadcasts[r], 2);
    gathered[r].resize(5 * n);
    group.communicator().allgather(testing::rank_values(r, 5), gathered[r]);
    group.communicator().barrier();
    descriptions[r] = group.describe();
  });
  for (int r = 0; r < n; ++r) {
    testing::expect_matches_sum(sums[r], testing::exact_sum(n, 1001), n, 1.0, "sum");
    EXPECT_EQ(sums[r], sums[0]);
    EXPECT_EQ(broadcasts[r], testing::rank_values(2, 17));
    for (int from = 0; from < n; ++from) {
      const std::vector<float> block(gathered[r].begin() + 5 * from,
                                     gathered[r].begin() + 5 * (from + 1));
      EXPECT_EQ(block, testing::rank_values(from, 5)) << "rank " << r << " block " << from;
    }
  }
  EXPECT_EQ(descriptions[1].rfind("rank 1 of 3; to rank0 (left): ", 0), 0u) << descriptions[1];
}

TEST(RankGroupTest, AGroupOfOneNeedsNoExchange) {
  RankGroupOptions options = options_for(0, 1);
  bool exchanged = false;
  RankGroup group(options, {"127.0.0.1", 0}, [&](const HostPort& own) {
    exchanged = true;
    return std::vector<HostPort>{own};
  });
  std::vector<float> data{1.5f, -2.0f};
  group.communicator().allreduce(data);
  group.communicator().barrier();
  EXPECT_FALSE(exchanged);
  EXPECT_EQ(data, (std::vector<float>{1.5f, -2.0f}));
}

TEST(RankGroupTest, ARankOutsideTheWorldIsRefused) {
  EXPECT_THROW(RankGroup(options_for(2, 2), {"127.0.0.1", 0},
                         [](const HostPort&) { return std::vector<HostPort>{}; }),
               UsageError);
}

TEST(RankGroupTest, AnExchangeThatNamesAnotherWorldIsRefused) {
  try {
    RankGroup group(options_for(0, 2), {"127.0.0.1", 0}, [](const HostPort& own) {
      return std::vector<HostPort>{own, own, own};
    });
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("named 3 ranks, but rank 0 is in a world of 2"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace dtrain
