// Elastic sync (issue 35) end to end: real dtrain processes under the local launcher, on
// loopback. The ps task counts the job's workers: a killed worker leaves the job at once and a
// step takes the gradients of those left, the survivors going on as the same processes; the
// launcher's restart of it joins again, and a step takes every worker's gradient again. A SIGTERM
// is one worker's clean leave; too few workers fail the job naming who left. The all-reduce side
// is tests/train/elastic_allreduce_test.cc.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <map>
#include <string>
#include <vector>

#include "support/process.h"
#include "support/ps_cluster.h"
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

// A sync job of `workers` (one ps task) that goes on while `min_workers` remain, with a step line
// every 20 steps; steps held to 2 ms or more (--step_delay_ms), so that the test's signal, and a
// restarted worker's joining, come in the middle of it.
std::vector<std::string> elastic_sync_job(int workers, int min_workers, int max_restarts,
                                          int steps) {
  return {"train",
          "--strategy",
          "sync",
          "--workers",
          std::to_string(workers),
          "--min_workers",
          std::to_string(min_workers),
          "--max_restarts",
          std::to_string(max_restarts),
          "--model",
          "softmax",
          "--threads",
          "1",
          "--data_dir",
          testing::mnist_dir().string(),
          "--train_steps",
          std::to_string(steps),
          "--log_every",
          "20",
          "--step_delay_ms",
          "2"};
}

// Waits until worker `index` has logged its local step `step` (a multiple of 20), then signals it.
void signal_sync_worker_at(DtrainProcess& launcher, int index, int64_t step, int signal) {
  const std::string worker = fmt::format("[worker{}] worker={}, epoch=", index, index);
  const std::string at = fmt::format("local_step={},", step);
  ASSERT_THAT(launcher.wait_for_line_where([&](const std::string& line) {
    return line.starts_with(worker) && line.find(at) != std::string::npos;
  }),
              HasSubstr(at));
  const pid_t pid = testing::child_with_arguments(
      launcher.pid(), {"--job_name", "worker", "--task_index", std::to_string(index)});
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, signal), 0);
}

TEST(ElasticSync, AKilledWorkerLeavesTheStepCountAndItsRestartRejoinsTheRunningJob) {
  DtrainProcess launcher(elastic_sync_job(3, 2, 1, 800));
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

}  // namespace
}  // namespace dtrain
