// A worker's first connection to a ps is retried as its later reconnections are: one accepted and
// then broken mid-handshake (a ps dropping it while flooded, a restarting one), or answered with an
// AUTH_FAILED that nothing proves the ps sent, is tried again until --peer_timeout, not the end of
// the worker.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/cut_proxy.h"
#include "support/ps_cluster.h"
#include "support/tamper_relay.h"

namespace dtrain::testing {
namespace {

using ::testing::HasSubstr;

TEST(FirstConnect, AFirstConnectionBrokenDuringTheHandshakeIsRetried) {
  HandStartedCluster cluster(1, 1);
  const std::vector<std::string> flags = concat(softmax_flags(), {"--train_steps", "30"});
  const auto ps = cluster.start("ps", 0, flags);
  // The first connection through the proxy is cut once 10 bytes of the ps's challenge are back.
  int connections = 0;
  CutProxy proxy(cluster.ps_port(0), [&connections] { return connections++ == 0 ? 10 : 0; });
  cluster.route_workers_to_ps(0, proxy.port());

  const ProcessResult worker = cluster.start("worker", 0, flags)->wait();
  const ProcessResult ps_result = ps->wait();
  ASSERT_EQ(worker.exit_code, 0) << all_output(worker);
  EXPECT_THAT(worker.out, HasSubstr("worker=0: test accuracy = 0."));
  EXPECT_EQ(proxy.cuts(), 1);
  EXPECT_EQ(ps_result.exit_code, 0) << all_output(ps_result);
}

TEST(FirstConnect, AnAuthFailedForgedOnTheWayIsRetriedNotTakenForAWrongSecret) {
  HandStartedCluster cluster(1, 1);
  const std::vector<std::string> flags = concat(softmax_flags(), {"--train_steps", "30"});
  const auto ps = cluster.start("ps", 0, flags);
  TamperRelay relay(cluster.ps_port(0), Attack::kForgeAuthFailed);
  cluster.route_workers_to_ps(0, relay.port());

  const ProcessResult worker = cluster.start("worker", 0, flags)->wait();
  EXPECT_EQ(relay.frames_tampered(), 1);
  // Before the ps is waited for: a worker that gave up would leave it waiting.
  ASSERT_EQ(worker.exit_code, 0) << all_output(worker);
  EXPECT_THAT(worker.out, HasSubstr("worker=0: test accuracy = 0."));
  const ProcessResult ps_result = ps->wait();
  EXPECT_EQ(ps_result.exit_code, 0) << all_output(ps_result);
}

}  // namespace
}  // namespace dtrain::testing
