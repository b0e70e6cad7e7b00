// SIGTERM (Kubernetes' notice before it kills a pod) and SIGHUP stop a run at its next step
// boundary: the chief writes a last checkpoint, every task exits with 128 + the signal, and a
// restart resumes from that checkpoint as if nothing had happened. A task that cannot reach a
// step boundary still exits within --shutdown_timeout.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "ckpt/checkpoint_manager.h"
#include "support/process.h"
#include "support/ps_cluster.h"
#include "support/temp_dir.h"

namespace dtrain::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::vector<std::string> local_flags(const std::filesystem::path& train_dir, int64_t steps) {
  return {"train",
          "--model",
          "mlp",
          "--hidden_units",
          "64",
          "--batch_size",
          "50",
          "--threads",
          "1",
          "--log_every",
          "10",
          "--train_dir",
          train_dir.string(),
          "--data_dir",
          mnist_dir().string(),
          "--train_steps",
          std::to_string(steps)};
}

Checkpoint newest(const std::filesystem::path& dir) {
  auto restored = CheckpointManager(dir).restore_latest();
  EXPECT_TRUE(restored.checkpoint.has_value());
  return std::move(*restored.checkpoint);
}

// The global step in "stopped by SIG... at global step N", if the line is there.
std::optional<int64_t> stopped_at(const std::string& out) {
  const auto numbers = numbers_in(out, "stopped by SIG[A-Z]+ at global step ([0-9]+)");
  if (!numbers) return std::nullopt;
  return (*numbers)[0];
}

TEST(Shutdown, ALocalRunStoppedBySigtermCheckpointsExitsWith143AndResumesBitForBit) {
  TempDir stopped, straight;
  DtrainProcess run(local_flags(stopped.path(), 1'000'000));
  ASSERT_FALSE(run.wait_for_line("step 100,").empty());
  run.send_signal(SIGTERM);
  const ProcessResult result = run.wait();
  ASSERT_EQ(result.exit_code, 143) << all_output(result);
  EXPECT_THAT(result.err, HasSubstr("received SIGTERM: stopping at the next step boundary"));
  const std::optional<int64_t> step = stopped_at(result.out);
  ASSERT_TRUE(step) << all_output(result);
  EXPECT_THAT(result.out, HasSubstr(fmt::format("checkpoint of step {} written to", *step)));
  EXPECT_EQ(newest(stopped.path()).global_step, *step);

  // The restart picks up there; 20 steps later it holds what an unbroken run holds.
  const ProcessResult resumed = run_dtrain(local_flags(stopped.path(), *step + 20));
  ASSERT_EQ(resumed.exit_code, 0) << all_output(resumed);
  EXPECT_THAT(resumed.out, HasSubstr(fmt::format("at global step {}", *step)));
  ASSERT_EQ(run_dtrain(local_flags(straight.path(), *step + 20)).exit_code, 0);
  const Checkpoint a = newest(straight.path()), b = newest(stopped.path());
  ASSERT_EQ(a.global_step, *step + 20);
  ASSERT_EQ(b.global_step, *step + 20);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i)
    EXPECT_EQ(a.tensors[i].values, b.tensors[i].values) << a.tensors[i].name;
}

// The mask of signals a thread of `pid` blocks, from /proc (its SigBlk line, hexadecimal).
uint64_t blocked_signals(pid_t pid, const std::string& thread) {
  std::ifstream status(fmt::format("/proc/{}/task/{}/status", pid, thread));
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("SigBlk:", 0) == 0) return std::stoull(line.substr(7), nullptr, 16);
  }
  ADD_FAILURE() << "no SigBlk line for thread " << thread << " of " << pid;
  return 0;
}

// A stop signal handled in the middle of a step's kernels corrupted the heap now and then
// (cli/shutdown.h): the training threads block the stop signals, and one thread, the watcher,
// takes them.
TEST(Shutdown, OnlyTheWatcherTakesTheStopSignalsNeverTheTrainingThread) {
  TempDir dir;
  DtrainProcess run(local_flags(dir.path(), 1'000'000));
  ASSERT_FALSE(run.wait_for_line("step 10,").empty());
  const uint64_t stop_signals =
      uint64_t{1} << (SIGTERM - 1) | uint64_t{1} << (SIGHUP - 1) | uint64_t{1} << (SIGINT - 1);
  EXPECT_EQ(blocked_signals(run.pid(), std::to_string(run.pid())) & stop_signals, stop_signals)
      << "the main thread, which trains, takes stop signals";
  int taking = 0;
  for (const auto& task : std::filesystem::directory_iterator(
           std::filesystem::path(fmt::format("/proc/{}/task", run.pid())))) {
    if ((blocked_signals(run.pid(), task.path().filename().string()) & stop_signals) == 0) ++taking;
  }
  EXPECT_GE(taking, 1) << "no thread takes the stop signals";
  run.send_signal(SIGTERM);
  const ProcessResult result = run.wait();
  EXPECT_EQ(result.exit_code, 143) << all_output(result);
}

TEST(Shutdown, ALocalClusterGivenSighupStopsEveryTaskAfterTheChiefsCheckpoint) {
  TempDir dir;
  DtrainProcess::Options options;
  options.own_process_group = true;  // the signal goes to the launcher alone, which passes it on
  DtrainProcess launcher({"train", "--strategy", "async", "--workers", "2", "--model", "softmax",
                          "--train_steps", "1000000", "--log_every", "100", "--train_dir",
                          dir.path().string(), "--data_dir", mnist_dir().string()},
                         options);
  ASSERT_FALSE(launcher.wait_for_line("[worker1] worker=1, epoch=").empty());
  launcher.send_signal(SIGHUP);
  const ProcessResult result = launcher.wait();
  EXPECT_EQ(result.exit_code, 129) << all_output(result);
  const std::string out = result.out;
  EXPECT_THAT(out, HasSubstr("[worker0] worker0: received SIGTERM"));
  EXPECT_THAT(out, HasSubstr("[ps0] ps0: stopped by SIGTERM"));
  EXPECT_THAT(out, HasSubstr("[worker1] worker=1: stopped by SIGTERM at global step"));
  const std::optional<int64_t> step =
      stopped_at(out.substr(out.find("[worker0] worker=0: stopped")));
  ASSERT_TRUE(step) << out;
  EXPECT_EQ(newest(dir.path()).global_step, *step);
  EXPECT_THAT(out, Not(HasSubstr("killed by signal")));
}

TEST(Shutdown, AllreduceRanksStopAtTheSameStepWhenOneOfThemIsSignalled) {
  TempDir dir;
  HandStartedCluster cluster(0, 2);
  const std::vector<std::string> flags =
      concat(with_flag(softmax_flags(), "--log_every", "100"),
             {"--train_steps", "1000000", "--train_dir", dir.path().string()});
  const auto rank0 = cluster.start("worker", 0, flags);
  const auto rank1 = cluster.start("worker", 1, flags);
  ASSERT_FALSE(rank1->wait_for_line("worker=1, epoch=").empty());
  rank1->send_signal(SIGTERM);
  const ProcessResult r1 = rank1->wait();
  const ProcessResult r0 = rank0->wait();
  EXPECT_EQ(r1.exit_code, 143) << all_output(r1);
  EXPECT_EQ(r0.exit_code, 143) << all_output(r0);  // stopped by its peer's signal
  const auto step0 = stopped_at(r0.out), step1 = stopped_at(r1.out);
  ASSERT_TRUE(step0 && step1) << all_output(r0) << all_output(r1);
  EXPECT_EQ(*step0, *step1);
  EXPECT_EQ(newest(dir.path()).global_step, *step0);
}

TEST(Shutdown, ATaskThatCannotReachAStepBoundaryStillExitsWithinTheShutdownTimeout) {
  HandStartedCluster cluster(1, 2);
  const std::vector<std::string> flags =
      concat(softmax_flags(), {"--train_steps", "100", "--shutdown_timeout", "2"});
  const auto ps = cluster.start("ps", 0, flags);
  // Worker 1 waits for the chief, which never comes: it has no step boundary to stop at.
  const auto worker1 = cluster.start("worker", 1, flags);
  ASSERT_FALSE(worker1->wait_for_line("worker1: connected to 1 ps task(s)").empty());
  worker1->send_signal(SIGTERM);
  const ProcessResult result = worker1->wait();
  EXPECT_EQ(result.exit_code, 143) << all_output(result);
  EXPECT_THAT(result.err, HasSubstr("worker1: did not stop within 2 s (--shutdown_timeout); "
                                    "exiting now with 143"));
  ps->send_signal(SIGTERM);
  const ProcessResult ps_result = ps->wait();
  EXPECT_EQ(ps_result.exit_code, 143) << all_output(ps_result);
}

}  // namespace
}  // namespace dtrain::testing
