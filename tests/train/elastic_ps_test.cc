// Elastic ps jobs (issue 35) end to end: real dtrain processes under the local launcher, on
// loopback. Sync: the ps task counts the job's workers: a killed worker leaves the job at once and
// a step takes the gradients of those left, the survivors going on as the same processes; the
// launcher's restart of it joins again, and a step takes every worker's gradient again. A SIGTERM
// is one worker's clean leave; too few workers fail the job naming who left. Async: a worker
// started by hand joins a running job through its ps0, which hands it the next free identity,
// up to --max_workers. The all-reduce side is tests/train/elastic_allreduce_test.cc.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cluster/free_ports.h"
#include "support/elastic_job.h"
#include "support/process.h"
#include "support/ps_cluster.h"
#include "support/tamper_relay.h"
#include "support/tb_events.h"
#include "support/temp_dir.h"
#include "support/text_match.h"

namespace dtrain {
namespace {

using testing::all_matches;
using testing::all_output;
using testing::concat;
using testing::count_lines_containing;
using testing::DtrainProcess;
using ::testing::HasSubstr;
using testing::Match;
using testing::ProcessResult;

// An elastic sync job (one ps task; support/elastic_job.h, the all-reduce tests' fixture too).
testing::ElasticJob sync_job(int workers, int min_workers, int max_restarts, int steps) {
  return {.strategy = "sync",
          .workers = workers,
          .min_workers = min_workers,
          .max_restarts = max_restarts,
          .steps = steps};
}

std::vector<std::string> elastic_sync_job(int workers, int min_workers, int max_restarts,
                                          int steps) {
  return sync_job(workers, min_workers, max_restarts, steps).launcher_flags();
}

// Waits until worker `index` has logged its local step `step` (a multiple of 20), then signals it.
void signal_sync_worker_at(DtrainProcess& launcher, int index, int64_t step, int signal) {
  ASSERT_GT(testing::ElasticJob{.strategy = "sync"}.signal_worker_at(launcher, index, step, signal),
            0);
}

TEST(ElasticSync, AKilledWorkerLeavesTheStepCountAndItsRestartRejoinsTheRunningJob) {
  testing::TempDir train_dir;
  DtrainProcess launcher(
      concat(elastic_sync_job(3, 2, 1, 800), {"--train_dir", train_dir.path().string()}));
  signal_sync_worker_at(launcher, 1,
                        testing::fault_step("elastic sync worker 1 killed at step", 2, 10) * 20,
                        SIGKILL);
  const ProcessResult r = launcher.wait();
  ASSERT_EQ(r.exit_code, 0) << all_output(r);

  // The ps counted worker1 out at once, then in again once restarted.
  const std::vector<Match> lost = all_matches(
      r.out,
      R"(\[ps0\] .*ps0: worker1 was lost at step ([0-9]+): 2 workers now, 2 gradients a step)");
  ASSERT_EQ(lost.size(), 1u) << r.out;
  const std::vector<Match> joined = all_matches(
      r.out,
      R"(\[ps0\] .*ps0: worker1 joined at step ([0-9]+): 3 workers now, 3 gradients a step)");
  ASSERT_EQ(joined.size(), 1u) << r.out;
  EXPECT_GE(std::stoll(joined[0][1]), std::stoll(lost[0][1]));
  EXPECT_EQ(count_lines_containing(r.out, "[launcher] worker1 was killed by signal 9"), 1);

  // The survivors went on as the same processes, and each says who left and who joined.
  for (const int survivor : {0, 2}) {
    const std::string prefix = fmt::format("[worker{0}] worker{0}: ", survivor);
    EXPECT_EQ(count_lines_containing(r.out, prefix + "sync training of softmax"), 1) << r.out;
    EXPECT_EQ(count_lines_containing(r.out, fmt::format("{}worker1 left at step {}: 2 workers now",
                                                        prefix, lost[0][1])),
              1)
        << r.out;
  }
  for (const int worker : {0, 1, 2}) {
    EXPECT_EQ(count_lines_containing(r.out, fmt::format("[worker{0}] worker{0}: worker1 joined at "
                                                        "step {1}: 3 workers now",
                                                        worker, joined[0][1])),
              1)
        << r.out;
  }
  EXPECT_EQ(count_lines_containing(r.out, "[worker1] worker1: sync training of softmax"), 2);
  // No step was lost: the ps reached the last one, and every worker ends with its values.
  EXPECT_THAT(r.out, HasSubstr("ps0: done at global step 800:"));
  const std::map<int, std::string> crcs = testing::parameter_crcs(r.out);
  ASSERT_EQ(crcs.size(), 3u) << r.out;
  EXPECT_EQ(crcs.at(0), crcs.at(1));
  EXPECT_EQ(crcs.at(0), crcs.at(2));
  EXPECT_THAT(r.out, HasSubstr("1 worker(s) left, 1 joined"));
  // The chief's TensorBoard scalar "workers", as an independent reader decodes it, went 3, then
  // 2, then 3 again.
  const std::vector<std::filesystem::path> chief = testing::event_files(train_dir.path());
  ASSERT_EQ(chief.size(), 1u);
  std::vector<int> workers;
  for (const auto& [step, value] :
       testing::scalars_of(testing::dump_events(chief[0])["files"][0], "workers")) {
    if (workers.empty() || workers.back() != static_cast<int>(value))
      workers.push_back(static_cast<int>(value));
  }
  EXPECT_THAT(workers, ::testing::ElementsAre(3, 2, 3));
}

TEST(ElasticSync, ASigtermIsOneWorkersCleanLeave) {
  DtrainProcess launcher(elastic_sync_job(3, 2, 1, 800));
  signal_sync_worker_at(launcher, 2,
                        testing::fault_step("elastic sync worker 2 stopped at step", 2, 10) * 20,
                        SIGTERM);
  const ProcessResult r = launcher.wait();
  ASSERT_EQ(r.exit_code, 0) << all_output(r);
  const std::vector<Match> left =
      all_matches(r.out, R"(\[worker2\] worker=2: left the job at global step ([0-9]+) after )");
  ASSERT_EQ(left.size(), 1u) << r.out;
  EXPECT_EQ(all_matches(r.out, R"(ps0: worker2 left at step [0-9]+ \(it stopped\): 2 workers now)")
                .size(),
            1u)
      << r.out;
  for (const int survivor : {0, 1}) {
    EXPECT_EQ(all_matches(
                  r.out, fmt::format(R"(\[worker{0}\] worker{0}: worker2 left at step )", survivor))
                  .size(),
              1u)
        << r.out;
  }
  // A leave is neither a failure nor restarted; the two left finish the run.
  EXPECT_EQ(count_lines_containing(r.out, "[worker2] worker2: sync training of softmax"), 1);
  EXPECT_EQ(count_lines_containing(r.out, "starting it again"), 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("ps0: done at global step 800:"));
}

TEST(ElasticSync, TooFewWorkersFailTheJobNamingWhoLeft) {
  DtrainProcess launcher(elastic_sync_job(2, 2, 0, 3000));
  signal_sync_worker_at(launcher, 1, 40, SIGKILL);
  const ProcessResult r = launcher.wait();
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(all_output(r),
              ::testing::ContainsRegex(
                  R"(\[worker0\] dtrain: error: ps0: worker1 was lost at step [0-9]+: 1 )"
                  R"(worker\(s\) remain, fewer than --min_workers 2)"));
}

// Under torchrun-style variables: rank 0 is the ps task (--ps 1), ranks 1..3 workers 0..2, every
// rank given --min_workers; the rank of worker2 is SIGKILLed at a step, and the others finish.
TEST(ElasticSync, UnderTorchrunStyleVariablesAKilledWorkerRankLeavesAndTheOthersFinish) {
  const uint16_t port = pick_free_ports(1)[0];
  std::vector<std::unique_ptr<DtrainProcess>> ranks;
  for (int r = 0; r < 4; ++r) {
    DtrainProcess::Options options;
    options.extra_env =
        testing::launcher_rank_env(r, 4, "127.0.0.1", port, "elastic sync test secret, 32 bytes");
    ranks.push_back(std::make_unique<DtrainProcess>(
        concat({"task", "--strategy", "sync", "--ps", "1", "--min_workers", "2"},
               testing::elastic_training(600)),
        options));
  }
  const int64_t kill_at = testing::fault_step("elastic sync rank 3 killed at step", 2, 10) * 20;
  ASSERT_THAT(ranks[3]->wait_for_line(fmt::format("local_step={},", kill_at)),
              HasSubstr("worker=2"));
  ranks[3]->send_signal(SIGKILL);
  EXPECT_EQ(ranks[3]->wait().signal, SIGKILL);
  const ProcessResult ps = ranks[0]->wait();
  ASSERT_EQ(ps.exit_code, 0) << all_output(ps);
  EXPECT_EQ(all_matches(all_output(ps), R"(ps0: worker2 was lost at step [0-9]+: 2 workers now, 2 )"
                                        R"(gradients a step)")
                .size(),
            1u)
      << all_output(ps);
  EXPECT_THAT(ps.out, HasSubstr("ps0: done at global step 600:"));
  for (const int r : {1, 2}) {
    const ProcessResult result = ranks[static_cast<size_t>(r)]->wait();
    ASSERT_EQ(result.exit_code, 0) << all_output(result);
    EXPECT_EQ(
        count_lines_containing(result.out, fmt::format("worker{}: worker2 left at step ", r - 1)),
        1)
        << result.out;
  }
}

// ---- async: a worker that joins takes the next free identity ----

std::vector<std::string> async_training() {
  return {"--model",         "softmax",
          "--threads",       "1",
          "--data_dir",      testing::mnist_dir().string(),
          "--train_steps",   "2000",
          "--log_every",     "20",
          "--step_delay_ms", "2"};
}

TEST(ElasticAsync, AWorkerStartedByHandJoinsTheRunningJobAsTheNextFreeIdentity) {
  testing::TempDir dir;
  const std::string secret_file =
      testing::write_secret_file(dir, "async join test secret, 32 bytes");
  DtrainProcess launcher(concat({"train", "--strategy", "async", "--workers", "2", "--max_workers",
                                 "3", "--secret_file", secret_file},
                                async_training()));
  const std::vector<Match> ps0 = all_matches(launcher.wait_for_line("more join with"),
                                             R"(--join ([a-z0-9.]+:[0-9]+) \(ps0\))");
  ASSERT_EQ(ps0.size(), 1u);
  ASSERT_THAT(launcher.wait_for_line("[worker0] worker=0, epoch=0, global_step="),
              HasSubstr("local_step=20,"));
  // The job's training flags and secret; no identity and no cluster flags: ps0 hands them out.
  const std::vector<std::string> join = {"task",    "--strategy",    "async",    "--join",
                                         ps0[0][1], "--secret_file", secret_file};
  DtrainProcess joiner(concat(join, async_training()));
  ASSERT_THAT(joiner.wait_for_line("worker2: worker2 joined at step"), HasSubstr("3 workers now"));
  // A second one finds every identity taken.
  const ProcessResult refused = DtrainProcess(concat(join, async_training())).wait();
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(all_output(refused),
              HasSubstr("ps0: no worker identity is free: workers 0..1 are the job's own (one is "
                        "free once lost for --worker_timeout 60 s), and 2..2 are in the job "
                        "(--max_workers 3)"));
  const ProcessResult joined = joiner.wait();
  const ProcessResult r = launcher.wait();
  ASSERT_EQ(joined.exit_code, 0) << all_output(joined);
  ASSERT_EQ(r.exit_code, 0) << all_output(r);
  EXPECT_THAT(joined.out, HasSubstr("worker2: joined the async job whose ps0 is at " + ps0[0][1] +
                                    " (--join) as worker 2 of its 2"));
  const std::vector<Match> at =
      all_matches(r.out, R"(\[ps0\] .*ps0: worker2 joined at step ([0-9]+): 3 workers now)");
  ASSERT_EQ(at.size(), 1u) << r.out;
  for (const int worker : {0, 1}) {
    EXPECT_EQ(count_lines_containing(r.out, fmt::format("[worker{0}] worker{0}: worker2 joined at "
                                                        "step {1}: 3 workers now",
                                                        worker, at[0][1])),
              1)
        << r.out;
  }
  // The joiner trained, and the ps counted it: its steps are in the job's, which ended on time.
  EXPECT_EQ(all_matches(joined.out, R"(worker=2: training elapsed time: [0-9.]+ s \([1-9][0-9]* )"
                                    R"(local steps)")
                .size(),
            1u)
      << joined.out;
  EXPECT_THAT(r.out, HasSubstr("ps0: 3 workers in the job at the end (1 joined, 0 left"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("ps0: done at global step 200[0-9]:"));
}

// The reply to a joiner's claim is cut on the way: ps0 holds the identity it handed out, and the
// joiner asks again on a new connection, getting that same identity (one claim a process) rather
// than exiting, or finding every identity taken by its own first claim.
TEST(ElasticAsync, AJoinerWhoseClaimReplyIsCutAsksAgainAndGetsTheIdentityHeldForIt) {
  testing::TempDir dir;
  const std::string secret_file =
      testing::write_secret_file(dir, "async join test secret, 32 bytes");
  DtrainProcess launcher(concat({"train", "--strategy", "async", "--workers", "2", "--max_workers",
                                 "3", "--secret_file", secret_file},
                                async_training()));
  const std::vector<Match> ps0 = all_matches(launcher.wait_for_line("more join with"),
                                             R"(--join [a-z0-9.]+:([0-9]+) \(ps0\))");
  ASSERT_EQ(ps0.size(), 1u);
  testing::TamperRelay relay(static_cast<uint16_t>(std::stoi(ps0[0][1])),
                             testing::Attack::kCutClaimReply);
  ASSERT_THAT(launcher.wait_for_line("[worker0] worker=0, epoch=0, global_step="),
              HasSubstr("local_step=20,"));
  DtrainProcess joiner(
      concat({"task", "--strategy", "async", "--join", fmt::format("127.0.0.1:{}", relay.port()),
              "--secret_file", secret_file},
             async_training()));
  const ProcessResult joined = joiner.wait();
  const ProcessResult r = launcher.wait();
  EXPECT_EQ(relay.frames_tampered(), 1);
  ASSERT_EQ(joined.exit_code, 0) << all_output(joined);
  EXPECT_THAT(joined.out, HasSubstr("(--join) as worker 2 of its 2"));
  EXPECT_THAT(joined.out, HasSubstr("worker2: worker2 joined at step"));
  ASSERT_EQ(r.exit_code, 0) << all_output(r);
}

}  // namespace
}  // namespace dtrain
