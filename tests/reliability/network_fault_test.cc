// Network faults (issue 5, item 9): each task on a host of its own (a network namespace with its
// own address, on a bridge; payloads over TCP, as between hosts), and the faults put on one
// worker's link to the ps at a seeded step:
// a slow link with random loss, which training rides out untouched; a cut, which heartbeats find
// on both sides within --liveness_timeout and which heals by reconnecting; and a cut that lasts,
// which ends sync training with an error naming the worker. Skipped, with the reason, where this
// machine cannot make namespaces (not root).
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support/checkpoints.h"
#include "support/process.h"
#include "support/ps_cluster.h"
#include "support/temp_dir.h"
#include "support/virtual_network.h"

namespace dtrain {
namespace {

using testing::all_output;
using testing::concat;
using testing::DtrainProcess;
using testing::fault_step;
using testing::HandStartedCluster;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ProcessResult;
using testing::softmax_flags;
using testing::VirtualNetwork;

// One ps (host 0) and two workers (hosts 1 and 2); the faults go on worker 1's link.
constexpr int kPsHost = 0;
constexpr int kWorker1Host = 2;

class NetworkFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const auto reason = VirtualNetwork::unavailable()) GTEST_SKIP() << *reason;
    network_.emplace(3);
    cluster_.emplace(1, 2, *network_);
  }

  // Starts the ps and both workers; worker 1 prints every step, so that a fault can wait for one.
  // Payloads over TCP, as between hosts: these hosts share this machine's kernel, so under the
  // default --transport auto the ps would copy them through memory, past the faulty link.
  void start(const std::vector<std::string>& given) {
    const std::vector<std::string> flags = concat(given, {"--transport", "tcp"});
    ps_ = cluster_->start("ps", 0, flags);
    worker0_ = cluster_->start("worker", 0, flags);
    worker1_ = cluster_->start("worker", 1, testing::with_flag(flags, "--log_every", "1"));
  }

  // Blocks until worker 1 has printed its step `step`.
  void wait_for_worker1_step(int64_t step) {
    ASSERT_THAT(worker1_->wait_for_line(fmt::format("local_step={},", step)),
                HasSubstr("worker=1"));
  }

  // The network first, so that it outlives the processes running on it.
  std::optional<VirtualNetwork> network_;
  std::optional<HandStartedCluster> cluster_;
  std::unique_ptr<DtrainProcess> ps_, worker0_, worker1_;
};

// Sync training computes the same thing whatever the network does to its frames: TCP delivers
// them late, never different, and two workers' gradients sum to the same bits in either order. So
// the run over a slow, lossy link must end on exactly the clean run's parameters, with no
// connection taken for lost on the way.
TEST_F(NetworkFaults, SyncOverASlowLossyLinkEndsWithTheParametersOfACleanRun) {
  constexpr int kSteps = 200;
  const std::vector<std::string> flags = concat(
      softmax_flags(), {"--sync_replicas", "--train_steps", std::to_string(kSteps),
                        "--liveness_timeout", "3", "--peer_timeout", "60", "--transport", "tcp"});
  // ps, chief (which checkpoints into `dir` at the end), worker 1.
  auto train = [&](const testing::TempDir& dir) {
    auto ps = cluster_->start("ps", 0, flags);
    auto chief = cluster_->start("worker", 0, concat(flags, {"--train_dir", dir.path().string()}));
    auto worker1 = cluster_->start("worker", 1, flags);
    std::vector<ProcessResult> results = {chief->wait(), worker1->wait(), ps->wait()};
    for (const ProcessResult& r : results) EXPECT_EQ(r.exit_code, 0) << all_output(r);
    return results;
  };
  const testing::TempDir clean_dir, faulty_dir;
  train(clean_dir);
  // 20 Mbit/s each way and 3% of packets lost each way, between worker 1 and the ps.
  network_->slow_link(kWorker1Host, 20'000);
  network_->lose(kWorker1Host, kPsHost, 30);
  const std::vector<ProcessResult> faulty = train(faulty_dir);
  if (HasFailure()) return;

  EXPECT_GT(network_->dropped(kWorker1Host), 0u) << "the lossy link lost nothing";
  const auto summary = testing::ps_summary(faulty[2].out);
  ASSERT_TRUE(summary) << all_output(faulty[2]);
  EXPECT_EQ(summary->step, kSteps);
  EXPECT_EQ(summary->applied, 2 * kSteps);  // softmax's two shards, once a step
  EXPECT_EQ(summary->failed, 0) << all_output(faulty[2]);
  for (const ProcessResult& r : faulty) EXPECT_THAT(r.out, Not(HasSubstr("lost "))) << r.out;

  const Checkpoint clean = testing::newest_checkpoint(clean_dir.path());
  const Checkpoint after_faults = testing::newest_checkpoint(faulty_dir.path());
  EXPECT_EQ(after_faults.global_step, kSteps);
  EXPECT_EQ(testing::max_abs_difference(clean, after_faults, "w"), 0.0f);
  EXPECT_EQ(testing::max_abs_difference(clean, after_faults, "b"), 0.0f);
}

// A cut link sends no reset: both ends see only silence, which the heartbeats of
// --liveness_timeout turn into a lost connection on each side. The worker says so once and keeps
// trying; once the link is back it reconnects, and every push it had in flight is applied once.
TEST_F(NetworkFaults, ACutLinkIsFoundOnBothSidesAndHealsByReconnecting) {
  start(concat(softmax_flags(), {"--train_steps", "1500", "--step_delay_ms", "5",
                                 "--liveness_timeout", "2", "--peer_timeout", "60"}));
  const int64_t cut_at = fault_step("worker 1's link to the ps cut at its step", 20, 200);
  wait_for_worker1_step(cut_at);
  network_->cut(kWorker1Host, kPsHost);
  EXPECT_THAT(worker1_->wait_for_line("lost ps0"), HasSubstr("stopped answering"));
  EXPECT_THAT(ps_->wait_for_line("lost worker 1"), HasSubstr("waiting up to 60 s"));
  network_->heal(kWorker1Host);
  EXPECT_THAT(worker1_->wait_for_line("reconnected to ps0"), HasSubstr("worker1"));
  EXPECT_THAT(ps_->wait_for_line("worker 1 is back"), HasSubstr("ps0"));

  const ProcessResult w0 = worker0_->wait(), w1 = worker1_->wait(), ps = ps_->wait();
  ASSERT_EQ(w0.exit_code, 0) << all_output(w0);
  ASSERT_EQ(w1.exit_code, 0) << all_output(w1);
  ASSERT_EQ(ps.exit_code, 0) << all_output(ps);
  EXPECT_GT(network_->dropped(kWorker1Host), 0u);
  EXPECT_EQ(testing::count_lines_containing(w1.out, "lost ps0"), 1) << w1.out;
  // Worker 1 trained on after the cut, and each acknowledged push was applied once, to each of
  // softmax's two shards: the one cut off in flight too.
  const int64_t steps1 = testing::local_steps_of(1, w1.out);
  EXPECT_GT(steps1, cut_at) << w1.out;
  const auto summary = testing::ps_summary(ps.out);
  ASSERT_TRUE(summary) << all_output(ps);
  EXPECT_EQ(summary->applied, 2 * (testing::local_steps_of(0, w0.out) + steps1)) << all_output(ps);
  EXPECT_EQ(summary->applied, 2 * summary->step);
  EXPECT_EQ(summary->failed, 1) << "the cut connection: " << all_output(ps);
}

// A worker cut off for good, in sync mode without spares: the ps finds it gone, waits
// --worker_timeout for it, then stops every task it can reach with one error naming it (the
// default --on_worker_loss stop); the cut-off worker gives up reconnecting after --peer_timeout
// with an error naming the ps it cannot reach. Nobody hangs.
TEST_F(NetworkFaults, AWorkerCutOffForGoodStopsSyncTrainingWithAnErrorNamingIt) {
  start(concat(softmax_flags(), {"--sync_replicas", "--train_steps", "100000", "--liveness_timeout",
                                 "2", "--worker_timeout", "2", "--peer_timeout", "8"}));
  const int64_t cut_at = fault_step("worker 1's link to the ps cut for good at its step", 20, 200);
  wait_for_worker1_step(cut_at);
  network_->cut(kWorker1Host, kPsHost);

  const ProcessResult ps = ps_->wait(), w0 = worker0_->wait(), w1 = worker1_->wait();
  EXPECT_EQ(ps.exit_code, 1) << all_output(ps);
  EXPECT_EQ(w0.exit_code, 1) << all_output(w0);
  for (const ProcessResult* r : {&ps, &w0}) {
    EXPECT_THAT(r->err, HasSubstr("ps0: worker 1 was lost at step"));
    EXPECT_THAT(r->err, HasSubstr("--on_worker_loss stop"));
  }
  EXPECT_EQ(w1.exit_code, 1) << all_output(w1);
  EXPECT_THAT(w1.out, HasSubstr("lost ps0 (10.77.0.1:2222)")) << all_output(w1);
  EXPECT_THAT(w1.err, HasSubstr("could not reconnect to ps0 at 10.77.0.1:2222 within 8 s"))
      << all_output(w1);
  EXPECT_GT(network_->dropped(kWorker1Host), 0u);
}

}  // namespace
}  // namespace dtrain
