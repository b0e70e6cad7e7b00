// Waiting for a peer that is not there, and a ps that is gone, with real tasks (issue 32, items 8
// and 9): a worker signalled while it connects stops at once; a ps whose only worker failed ends
// at once, saying why; and a ps killed under default flags (no checkpoints) is re-seeded by the
// chief, so that the run reaches its last step.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <string>
#include <vector>

#include "support/process.h"
#include "support/ps_cluster.h"

namespace dtrain::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(PeerWait, AWorkerSignalledWhileConnectingToAPsStopsAtOnce) {
  HandStartedCluster cluster(1, 1);  // the ps is never started
  const auto worker = cluster.start(
      "worker", 0, concat(softmax_flags(), {"--peer_timeout", "60", "--shutdown_timeout", "30"}));
  ASSERT_THAT(worker->wait_for_line("async training of"), HasSubstr("worker0"));
  worker->send_signal(SIGTERM);
  const ProcessResult r = worker->wait();
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << all_output(r);
  // Not the shutdown timeout's "did not stop within 30 s": the wait itself ended.
  EXPECT_THAT(r.out, HasSubstr(fmt::format(
                         "worker0: stopped by SIGTERM while waiting for ps0 at localhost:{}",
                         cluster.ps_port(0))))
      << all_output(r);
}

TEST(PeerWait, APsWhoseOnlyWorkerFailedEndsAtOnceSayingWhy) {
  HandStartedCluster cluster(2, 1);  // ps1 is never started
  const std::vector<std::string> flags = concat(softmax_flags(), {"--peer_timeout", "1"});
  const auto ps = cluster.start("ps", 0, flags);
  const ProcessResult worker = cluster.start("worker", 0, flags)->wait();
  EXPECT_EQ(worker.exit_code, 1) << all_output(worker);
  // "1 s" is --peer_timeout as given, not a reading of the clock: the worker's one wait for both
  // ps tasks states its whole span, however much of it reaching ps0 took.
  const std::string unreachable =
      fmt::format("could not connect to ps1 at localhost:{} within 1 s (", cluster.ps_port(1));
  EXPECT_THAT(worker.err, HasSubstr(unreachable)) << all_output(worker);
  // Its --worker_timeout (60 s) is not waited out: the worker said it failed.
  const ProcessResult r = ps->wait();
  EXPECT_EQ(r.exit_code, 1) << all_output(r);
  EXPECT_THAT(r.err, HasSubstr("ps0: every worker ended before training finished, at step 0; "
                               "worker 0 failed: "))
      << all_output(r);
  EXPECT_THAT(r.err, HasSubstr(unreachable)) << all_output(r);
}

// --save_steps is 0 by default: the restarted ps finds no checkpoint, and the chief puts back the
// values it holds.
TEST(PeerWait, APsKilledUnderDefaultFlagsIsReseededByTheChiefAndTheRunFinishes) {
  DtrainProcess launcher(concat({"train", "--strategy", "sync", "--ps", "1", "--workers", "2",
                                 "--max_restarts", "1", "--train_steps", "400"},
                                with_flag(softmax_flags(), "--log_every", "1")));
  const int64_t kill_at = fault_step("ps killed under default flags at global step", 20, 100);
  if (launcher.wait_for_line(fmt::format("global_step={},", kill_at)).empty())
    FAIL() << "no step " << kill_at << ": " << all_output(launcher.wait());
  const pid_t ps = child_with_arguments(launcher.pid(), {"--job_name", "ps"});
  ASSERT_GT(ps, 0);
  ASSERT_EQ(::kill(ps, SIGKILL), 0);
  const ProcessResult r = launcher.wait();
  ASSERT_EQ(r.exit_code, 0) << all_output(r);
  EXPECT_THAT(r.out, HasSubstr("[worker0] worker0: ps0 restarted without a checkpoint: re-seeded "
                               "from worker0's copy at step "));
  EXPECT_THAT(r.out, Not(HasSubstr("without its variables")));
  EXPECT_THAT(r.out, HasSubstr("ps0: done at global step 400"));
}

}  // namespace
}  // namespace dtrain::testing
