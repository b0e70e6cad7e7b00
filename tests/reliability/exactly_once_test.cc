// Exactly once (issue 5, item 5): workers whose connections to the ps are cut at seeded random
// moments, both processes alive, reconnect and retry; the ps applies each acknowledged push once
// and answers a retry of one it had applied as a duplicate. The cuts drop a reply on its way back,
// after the ps applied the push, which is the case that would be applied twice without the
// (worker, sequence) check. Over TCP and through memory, where no reply crosses the socket (the
// ps writes the values into the worker's memory and posts the reply in the mailbox the two share):
// there the cuts drop pushes on their way instead, and a round cut after some of its pushes were
// applied is retried whole, those counted as duplicates.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "support/cut_proxy.h"
#include "support/process.h"
#include "support/ps_cluster.h"

namespace dtrain {
namespace {

using testing::all_output;
using testing::concat;
using testing::fault_step;
using testing::HandStartedCluster;
using testing::ProcessResult;
using testing::softmax_flags;

class ExactlyOnce : public ::testing::TestWithParam<std::string> {};

TEST_P(ExactlyOnce, PushesRetriedAcrossCutConnectionsAreAppliedExactlyOnce) {
  constexpr int kCuts = 4;
  HandStartedCluster cluster(1, 2);
  // The first kCuts connections through the proxy are cut after a seeded number of bytes, past
  // the handshake and the first pull; later ones live on. Over TCP the bytes counted are those
  // back from the ps, a softmax reply carrying its values, about 31 KiB; through memory, those
  // to the ps, a push's frame being about a hundred bytes.
  const bool tcp = GetParam() == "tcp";
  const int64_t first = tcp ? 64 * 1024 : 4 * 1024;
  int connections = 0;
  testing::CutProxy proxy(
      cluster.ps_port(0),
      [&]() -> uint64_t {
        const int k = connections++;
        if (k >= kCuts) return 0;
        return static_cast<uint64_t>(fault_step(
            fmt::format("cut connection {} ({}) after bytes", k, GetParam()), first, 8 * first));
      },
      tcp ? testing::CutProxy::Counting::kFromTarget : testing::CutProxy::Counting::kToTarget);
  cluster.route_workers_to_ps(0, proxy.port());
  const std::vector<std::string> flags =
      concat(softmax_flags(),
             {"--train_steps", "1500", "--peer_timeout", "60", "--transport", GetParam()});
  const auto ps = cluster.start("ps", 0, flags);
  const auto worker0 = cluster.start("worker", 0, flags);
  const auto worker1 = cluster.start("worker", 1, flags);
  const ProcessResult w0 = worker0->wait(), w1 = worker1->wait();
  const ProcessResult ps_result = ps->wait();
  ASSERT_EQ(w0.exit_code, 0) << all_output(w0);
  ASSERT_EQ(w1.exit_code, 0) << all_output(w1);
  ASSERT_EQ(ps_result.exit_code, 0) << all_output(ps_result);

  // Every cut was one outage, reported once by the worker it hit.
  EXPECT_EQ(proxy.cuts(), kCuts);
  EXPECT_EQ(testing::count_lines_containing(w0.out + w1.out, "lost ps0"), kCuts)
      << w0.out << w1.out;
  // Acknowledged pushes: one per local step of each worker, to each of softmax's two shards.
  const int64_t acknowledged =
      testing::local_steps_of(0, w0.out) + testing::local_steps_of(1, w1.out);
  const auto summary = testing::ps_summary(ps_result.out);
  ASSERT_TRUE(summary) << all_output(ps_result);
  EXPECT_EQ(summary->applied, 2 * acknowledged) << all_output(ps_result);
  EXPECT_EQ(summary->applied, 2 * summary->step);
  // Over TCP each cut dropped the reply to a push the ps had applied: its retry was a duplicate.
  if (tcp) {
    EXPECT_GE(summary->duplicates, kCuts) << all_output(ps_result);
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, ExactlyOnce, ::testing::Values("tcp", "shm"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace dtrain
