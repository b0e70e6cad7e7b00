// A relay on the path between a worker and a ps that does not hold the cluster secret: it passes
// the handshake through, then negates the gradient in every push and recomputes the CRC, or forges
// one frame (support/tamper_relay.h). Frame tags catch the first rewritten push; without them the
// same relay ruins training unnoticed, which is what shows it really tampers. A forged frame is
// caught by the tag over its header and meta before any of it is acted on; the worker reconnects
// and the run goes on to its last step. The gradients must cross the wire for that (--transport
// tcp): through memory they never pass the relay, whose frames, tagged alike, carry only where they
// lie.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/ps_cluster.h"
#include "support/tamper_relay.h"

namespace dtrain::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct TamperedRun {
  ProcessResult worker, ps;
  int rewritten = 0;
};

// A worker whose pushes are all rewritten gives up reconnecting after 2 s and is given up 1 s after
// it leaves; one that a forgery cut off reconnects within 5 s.
TamperedRun train_through_a_tampering_relay(const std::vector<std::string>& extra,
                                            Attack attack = Attack::kNegatePushes) {
  HandStartedCluster cluster(1, 1);
  const bool every_push = attack == Attack::kNegatePushes;
  const std::vector<std::string> flags = concat(
      softmax_flags(), concat({"--train_steps", "200", "--peer_timeout", every_push ? "2" : "5",
                               "--worker_timeout", every_push ? "1" : "5", "--transport", "tcp"},
                              extra));
  const auto ps = cluster.start("ps", 0, flags);
  TamperRelay relay(cluster.ps_port(0), attack);
  cluster.route_workers_to_ps(0, relay.port());
  TamperedRun run;
  run.worker = cluster.start("worker", 0, flags)->wait();
  run.ps = ps->wait();
  run.rewritten = relay.frames_tampered();
  return run;
}

// A forged frame is dropped with the connection it came on, unread; the run ends as it would have.
void expect_forgery_caught_and_run_completed(const TamperedRun& run, const ProcessResult& catcher) {
  EXPECT_EQ(run.rewritten, 1);
  EXPECT_THAT(all_output(catcher),
              HasSubstr("failed authentication (its header and meta, claiming type"))
      << all_output(catcher);
  ASSERT_EQ(run.worker.exit_code, 0) << all_output(run.worker);
  ASSERT_EQ(run.ps.exit_code, 0) << all_output(run.ps);
  EXPECT_THAT(all_output(run.worker), HasSubstr("reconnected to ps0")) << all_output(run.worker);
  const auto summary = ps_summary(run.ps.out);
  ASSERT_TRUE(summary) << all_output(run.ps);
  EXPECT_EQ(summary->step, 200);
  EXPECT_GT(test_accuracy(0, run.worker.out), 0.8) << all_output(run.worker);
}

TEST(Tampering, PushesRewrittenOnTheWayAreCaughtByTheirTagsAndNeverApplied) {
  const TamperedRun run = train_through_a_tampering_relay({});
  EXPECT_GE(run.rewritten, 1);
  EXPECT_NE(run.worker.exit_code, 0) << all_output(run.worker);
  EXPECT_THAT(all_output(run.ps), HasSubstr("failed authentication")) << all_output(run.ps);
  const auto summary = ps_summary(run.ps.out);
  ASSERT_TRUE(summary) << all_output(run.ps);
  EXPECT_EQ(summary->applied, 0);
  EXPECT_GE(summary->failed, 1);
}

TEST(Tampering, AForgedDoneReportWithTensorBytesIsCaughtBeforeThePsActsOnIt) {
  const TamperedRun run = train_through_a_tampering_relay({}, Attack::kForgeDoneWithTensors);
  expect_forgery_caught_and_run_completed(run, run.ps);
}

TEST(Tampering, AForgedErrorReplyIsCaughtBeforeTheWorkerActsOnItOrPrintsIt) {
  const TamperedRun run = train_through_a_tampering_relay({}, Attack::kForgeError);
  expect_forgery_caught_and_run_completed(run, run.worker);
  // Neither acted on nor printed, raw or escaped.
  EXPECT_THAT(all_output(run.worker), Not(HasSubstr("\x1b")));
  EXPECT_THAT(all_output(run.worker), Not(HasSubstr("stop\\x1b")));
}

TEST(Tampering, WithoutFrameTagsTheSameRelayRuinsTrainingUnnoticed) {
  const TamperedRun run = train_through_a_tampering_relay({"--unauthenticated_frames"});
  EXPECT_GE(run.rewritten, 200);
  ASSERT_EQ(run.worker.exit_code, 0) << all_output(run.worker);
  EXPECT_LT(test_accuracy(0, run.worker.out), 0.5) << all_output(run.worker);
  EXPECT_THAT(all_output(run.ps), Not(HasSubstr("failed authentication")));
  // Every task says its frames can be altered.
  for (const ProcessResult* task : {&run.worker, &run.ps}) {
    EXPECT_THAT(all_output(*task), HasSubstr("--unauthenticated_frames: frames after the handshake "
                                             "carry a CRC only"));
  }
}

}  // namespace
}  // namespace dtrain::testing
