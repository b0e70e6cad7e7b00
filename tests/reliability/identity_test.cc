// Who a task is, bound to its connections: a second process started with a task index already in
// the cluster is refused by the ps with an error naming where the first is connected from, and
// none of the first one's pushes is lost to it (before, the two shared one sequence of pushes and
// the ps dropped the one that came second as a duplicate, without a word).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/ps_cluster.h"

namespace dtrain::testing {
namespace {

using ::testing::HasSubstr;

TEST(Identity, ASecondWorkerWithTheSameTaskIndexIsRefusedNamingTheFirstAndTrainingIsUntouched) {
  HandStartedCluster cluster(1, 2);
  const std::vector<std::string> flags = concat(
      softmax_flags(), {"--train_steps", "300", "--peer_timeout", "30", "--worker_timeout", "5"});
  const auto ps = cluster.start("ps", 0, flags);
  // Worker 1 is not the chief: once connected, it waits for worker 0, so it holds its
  // connection while the duplicate tries.
  const auto worker1 = cluster.start("worker", 1, flags);
  ASSERT_FALSE(worker1->wait_for_line("worker1: connected to 1 ps task(s) as worker 1").empty());
  const ProcessResult duplicate = cluster.start("worker", 1, flags)->wait();
  EXPECT_NE(duplicate.exit_code, 0);
  EXPECT_THAT(duplicate.err,
              HasSubstr("refused this connection: worker 1 is already connected from 127.0.0.1:"));

  const ProcessResult worker0 = cluster.start("worker", 0, flags)->wait();
  const ProcessResult first = worker1->wait();
  const ProcessResult ps_result = ps->wait();
  ASSERT_EQ(worker0.exit_code, 0) << all_output(worker0);
  ASSERT_EQ(first.exit_code, 0) << all_output(first);
  ASSERT_EQ(ps_result.exit_code, 0) << all_output(ps_result);
  EXPECT_THAT(all_output(ps_result), HasSubstr("worker 1 is already connected from 127.0.0.1:"));
  const auto summary = ps_summary(ps_result.out);
  ASSERT_TRUE(summary) << all_output(ps_result);
  EXPECT_EQ(summary->duplicates, 0);
  EXPECT_EQ(summary->rejected, 1);
  EXPECT_GT(test_accuracy(1, first.out), 0.85) << all_output(first);
}

}  // namespace
}  // namespace dtrain::testing
