// Waiting is not death: a sync ps waiting for a straggler's gradient keeps reading the other
// worker's pushes. It used to stop reading until the step was complete; the pushes then filled
// the socket buffers, the kernel acknowledged nothing more, and within --liveness_timeout the
// waiting worker declared the healthy ps dead and reconnected, again and again.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>

#include "support/ps_cluster.h"

namespace dtrain::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(Straggler, ASyncPsWaitingForAStoppedWorkerIsNotTakenForDeadByTheOther) {
  HandStartedCluster cluster(1, 2);
  // 13 MB of parameters, one ps: a round's pushes are far more than the socket buffers hold
  // while the ps does not read them.
  const std::vector<std::string> flags =
      concat(with_flag(with_flag(softmax_flags(), "--model", "mlp"), "--log_every", "1"),
             {"--hidden_units", "4096", "--sync_replicas", "--train_steps", "30",
              "--liveness_timeout", "1", "--peer_timeout", "60"});
  const auto ps = cluster.start("ps", 0, flags);
  const auto worker0 = cluster.start("worker", 0, flags);
  const auto worker1 = cluster.start("worker", 1, flags);
  ASSERT_FALSE(worker1->wait_for_line("local_step=3,").empty());
  worker1->send_signal(SIGSTOP);
  // Worker 0 now waits for step 4 (or 5) with its pushes in flight: for four liveness timeouts it
  // must not take the ps for dead.
  const std::string lost = worker0->wait_for_line("lost ps0", std::chrono::seconds(4));
  worker1->send_signal(SIGCONT);
  EXPECT_EQ(lost, "");

  const ProcessResult w0 = worker0->wait();
  const ProcessResult w1 = worker1->wait();
  const ProcessResult ps_result = ps->wait();
  ASSERT_EQ(w0.exit_code, 0) << all_output(w0);
  ASSERT_EQ(w1.exit_code, 0) << all_output(w1);
  ASSERT_EQ(ps_result.exit_code, 0) << all_output(ps_result);
  EXPECT_THAT(all_output(w0), Not(HasSubstr("stopped answering")));
  EXPECT_THAT(all_output(ps_result), Not(HasSubstr("lost worker")));
  const auto summary = ps_summary(ps_result.out);
  ASSERT_TRUE(summary) << all_output(ps_result);
  EXPECT_EQ(summary->step, 30);
  EXPECT_EQ(summary->duplicates, 0);
  EXPECT_GT(test_accuracy(0, w0.out), 0.9) << all_output(w0);
  EXPECT_EQ(test_accuracy(0, w0.out), test_accuracy(1, w1.out));
}

}  // namespace
}  // namespace dtrain::testing
