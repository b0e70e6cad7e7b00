// Crashes in a parameter-server cluster (issue 5, items 1 to 3): real tasks killed with SIGKILL at
// seeded random steps. A killed ps comes back from the newest checkpoint and the workers report
// exactly the steps lost; a killed async worker comes back and carries on from the current
// parameters; a killed chief comes back without re-initialising the variables; and the local
// launcher does the restarting by itself. A ps or a worker killed while payloads move (over TCP,
// or copied by the ps out of and into the worker's memory) is named alike on both transports.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "support/process.h"
#include "support/ps_cluster.h"
#include "support/temp_dir.h"
#include "support/text_match.h"

namespace dtrain {
namespace {

using testing::all_matches;
using testing::all_output;
using ::testing::AnyOf;
using testing::concat;
using testing::DtrainProcess;
using testing::fault_step;
using testing::HandStartedCluster;
using ::testing::HasSubstr;
using testing::Match;
using ::testing::Not;
using testing::numbers_in;
using testing::ProcessResult;
using testing::softmax_flags;
using testing::test_accuracy;
using testing::wait_for_global_step;
using testing::with_flag;

// The global step of the last step line before the first line holding `marker`; -1 if none.
int64_t last_step_before(const std::string& out, const std::string& marker) {
  const size_t end = out.find(marker);
  const std::string before = out.substr(0, end);
  int64_t step = -1;
  for (const Match& line : all_matches(before, R"(global_step=([0-9]+),)"))
    step = std::stoll(line[1]);
  return step;
}

// ---- 2. a killed ps comes back from the newest checkpoint ----

TEST(Reliability, KilledPsComesBackFromTheNewestCheckpointAndTheLostStepsAreReported) {
  constexpr int kSteps = 600;
  testing::TempDir train_dir;
  HandStartedCluster cluster(1, 2);
  // Sync, so that every global step is one step line of each worker. Every task gets the same
  // --train_dir, where the chief saves every 50 steps and a restarted ps looks.
  const std::vector<std::string> flags = concat(
      softmax_flags(), {"--sync_replicas", "--train_steps", std::to_string(kSteps), "--train_dir",
                        train_dir.path().string(), "--save_steps", "50", "--peer_timeout", "60"});
  const std::vector<std::string> worker_flags = with_flag(flags, "--log_every", "1");
  auto ps = cluster.start("ps", 0, flags);
  std::vector<std::unique_ptr<DtrainProcess>> workers;
  for (int i = 0; i < 2; ++i) workers.push_back(cluster.start("worker", i, worker_flags));

  const int64_t kill_at = fault_step("ps killed at global step", 120, 400);
  ASSERT_THAT(workers[0]->wait_for_line(fmt::format("global_step={},", kill_at)),
              HasSubstr("worker=0"));
  ps->send_signal(SIGKILL);
  EXPECT_EQ(ps->wait().signal, SIGKILL);
  // The same command again, on the same port.
  ps = cluster.start("ps", 0, flags);

  std::vector<ProcessResult> results;
  for (auto& w : workers) results.push_back(w->wait());
  const ProcessResult ps_result = ps->wait();
  for (size_t i = 0; i < results.size(); ++i) {
    ASSERT_EQ(results[i].exit_code, 0)
        << "worker " << i << ": " << all_output(results[i]) << "\nps: " << all_output(ps_result);
  }
  ASSERT_EQ(ps_result.exit_code, 0) << all_output(ps_result);

  // The ps restored the newest checkpoint, which the chief wrote at or before the kill.
  const auto restored =
      numbers_in(ps_result.out,
                 R"(ps0: restored .*model\.ckpt-([0-9]+)\.safetensors at global step ([0-9]+))");
  ASSERT_TRUE(restored) << all_output(ps_result);
  const int64_t checkpoint = (*restored)[1];
  EXPECT_EQ(checkpoint % 50, 0);
  EXPECT_LE(checkpoint, kill_at);
  EXPECT_GT(checkpoint, 0);
  for (size_t i = 0; i < results.size(); ++i) {
    const std::string& out = results[i].out;
    // Once per outage, not once per step.
    EXPECT_EQ(testing::count_lines_containing(out, "lost ps0"), 1) << all_output(results[i]);
    // The steps lost are exactly those after the checkpoint: from it to the last step the
    // worker saw the ps reach.
    const int64_t last = last_step_before(out, "lost ps0");
    const auto lost = numbers_in(
        out,
        R"(ps0 is back after [0-9.]+ s, restored at global step ([0-9]+): the ([0-9]+) steps? after)");
    ASSERT_TRUE(lost) << all_output(results[i]);
    EXPECT_EQ((*lost)[0], checkpoint);
    // (The step in flight at the kill may have reached some of the dead ps's shards and been
    // answered for them: then the ps had got one step further than the last step line.)
    EXPECT_GE((*lost)[1], last - checkpoint) << "worker " << i;
    EXPECT_LE((*lost)[1], last + 1 - checkpoint) << "worker " << i;
    // Worker 0 printed kill_at before the kill; worker 1's reply of that step may still have been
    // on its way when the ps died.
    EXPECT_GE(last, i == 0 ? kill_at : kill_at - 1) << "worker " << i;
  }
  // After the restore, each of the remaining steps was applied once on each of softmax's two
  // shards: the pushes retried over the new connections were not applied twice.
  const auto summary = testing::ps_summary(ps_result.out);
  ASSERT_TRUE(summary) << all_output(ps_result);
  EXPECT_EQ(summary->step, kSteps);
  EXPECT_EQ(summary->applied, 2 * (kSteps - checkpoint));
  EXPECT_GT(test_accuracy(0, results[0].out), 0.85) << all_output(results[0]);
}

// ---- 1. a killed async worker comes back and carries on ----

TEST(Reliability, KilledAsyncWorkerComesBackWithTheCurrentParametersWhileTheOthersGoOn) {
  constexpr int kSteps = 3000;
  HandStartedCluster cluster(1, 2);
  const std::vector<std::string> flags =
      concat(with_flag(softmax_flags(), "--log_every", "1"),
             {"--train_steps", std::to_string(kSteps), "--peer_timeout", "60"});
  // Both workers slowed a little, so that neither finishes the run alone before the other
  // starts on a loaded machine: the test is about the others going on meanwhile.
  const std::vector<std::string> slowed = concat(flags, {"--step_delay_ms", "2"});
  const auto ps = cluster.start("ps", 0, flags);
  const auto chief = cluster.start("worker", 0, slowed);
  auto worker = cluster.start("worker", 1, slowed);

  const int64_t kill_at = fault_step("async worker killed at local step", 20, 200);
  const std::string last_line = worker->wait_for_line(fmt::format("local_step={},", kill_at));
  ASSERT_THAT(last_line, HasSubstr("worker=1"));
  worker->send_signal(SIGKILL);
  EXPECT_EQ(worker->wait().signal, SIGKILL);
  const int64_t step_at_kill = *numbers_in(last_line, R"(global_step=([0-9]+))")->begin();

  // The chief goes on alone: 100 more global steps come from it while worker 1 is dead.
  const int64_t later = step_at_kill + 100;
  std::string chief_line;
  for (int64_t s = later; chief_line.empty() && s < later + 5; ++s)
    chief_line = chief->wait_for_line(fmt::format("global_step={},", s));
  ASSERT_THAT(chief_line, HasSubstr("worker=0"));

  worker = cluster.start("worker", 1, slowed);
  const ProcessResult restarted = worker->wait();
  const ProcessResult chief_result = chief->wait();
  const ProcessResult ps_result = ps->wait();
  ASSERT_EQ(restarted.exit_code, 0) << all_output(restarted);
  ASSERT_EQ(chief_result.exit_code, 0) << all_output(chief_result);
  ASSERT_EQ(ps_result.exit_code, 0) << all_output(ps_result);
  // It pulled the current parameters: its first step is past everything done before it came.
  const auto first_step = numbers_in(restarted.out, R"(global_step=([0-9]+), local_step=1,)");
  ASSERT_TRUE(first_step) << all_output(restarted);
  EXPECT_GT((*first_step)[0], later);
  EXPECT_GT(testing::local_steps_of(1, restarted.out), 0);
  // Async: every push applied is a global step, once on each of softmax's two shards. (The
  // killed worker's last push may have reached one shard and not the other: one update apart.)
  const auto summary = testing::ps_summary(ps_result.out);
  ASSERT_TRUE(summary) << all_output(ps_result);
  EXPECT_GE(summary->step, kSteps);
  EXPECT_NEAR(summary->applied, 2 * summary->step, 1);
  EXPECT_GT(test_accuracy(1, restarted.out), 0.85) << all_output(restarted);
}

// ---- 1. sync: a lost worker, with and without spares ----

// A sync cluster of `workers` workers, R of them per step, where worker `victim` (not the chief) is
// killed at a seeded random global step; returns once the kill is done. The others and the ps go
// on.
struct SyncLoss {
  SyncLoss(int workers, int replicas, int victim, const std::vector<std::string>& extra,
           const std::vector<std::string>& model_flags = softmax_flags())
      : cluster(1, workers) {
    flags = concat(with_flag(model_flags, "--log_every", "1"),
                   concat({"--sync_replicas", "--replicas_to_aggregate", std::to_string(replicas),
                           "--train_steps", std::to_string(kSteps), "--peer_timeout", "60"},
                          extra));
    ps = cluster.start("ps", 0, flags);
    // The victim first, and the others once it is connected: with a spare, the others need not
    // wait for it, and on a loaded machine they could finish the run before it ever said hello
    // (it would then find the run over and leave, never lost, only absent).
    this->workers.resize(static_cast<size_t>(workers));
    auto& victim_task = this->workers[static_cast<size_t>(victim)];
    victim_task = cluster.start("worker", victim, flags);
    victim_task->wait_for_line("connected to 1 ps task(s)");
    for (int i = 0; i < workers; ++i) {
      if (i != victim) this->workers[static_cast<size_t>(i)] = cluster.start("worker", i, flags);
    }
    kill_at = fault_step(
        fmt::format("sync worker {} of {} (R={}) killed at global step", victim, workers, replicas),
        20, 300);
    // Its first step line shows that it is in the run.
    const bool joined = !victim_task->wait_for_line("local_step=1,").empty();
    // The chief's step lines. With a spare, the chief is sometimes the backup whose gradient is
    // stale, and its next line skips a step: the first line at or past kill_at, not that step's.
    const std::string line = wait_for_global_step(*this->workers[0], kill_at);
    killed = joined && !line.empty();
    victim_task->send_signal(SIGKILL);
    victim_task->wait();
  }
  static constexpr int kSteps = 600;
  HandStartedCluster cluster;
  std::vector<std::string> flags;
  std::unique_ptr<DtrainProcess> ps;
  std::vector<std::unique_ptr<DtrainProcess>> workers;
  int64_t kill_at = 0;
  bool killed = false;
};

TEST(Reliability, SyncWithABackupWorkerGoesOnWithoutAKilledOne) {
  // Three workers, two gradients per step: one spare. The default --worker_timeout (60 s) is far
  // longer than the rest of the run, which must not wait for it.
  SyncLoss run(3, 2, 2, {});
  ASSERT_TRUE(run.killed);
  std::vector<ProcessResult> results;
  for (int i = 0; i < 2; ++i) results.push_back(run.workers[static_cast<size_t>(i)]->wait());
  const ProcessResult ps_result = run.ps->wait();
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(results[i].exit_code, 0)
        << "worker " << i << ": " << all_output(results[i]) << "\nps: " << all_output(ps_result);
  }
  ASSERT_EQ(ps_result.exit_code, 0) << all_output(ps_result);
  EXPECT_THAT(ps_result.out + ps_result.err, HasSubstr("ps0: lost worker 2 at step"));
  EXPECT_THAT(ps_result.out + ps_result.err, Not(HasSubstr("did not come back")));
  const auto summary = testing::ps_summary(ps_result.out);
  ASSERT_TRUE(summary) << all_output(ps_result);
  EXPECT_EQ(summary->step, SyncLoss::kSteps);
}

TEST(Reliability, SyncWithABackupWorkerThatNeverStartsEndsAfterTheWorkerTimeout) {
  // Worker 2 of three never comes: the two others make every step, and once training is over the
  // ps waits --worker_timeout for the absent one, saying so, then ends instead of hanging.
  HandStartedCluster cluster(1, 3);
  const std::vector<std::string> flags =
      concat(softmax_flags(), {"--sync_replicas", "--replicas_to_aggregate", "2", "--train_steps",
                               "200", "--worker_timeout", "2"});
  const auto ps = cluster.start("ps", 0, flags);
  std::vector<std::unique_ptr<DtrainProcess>> workers;
  for (int i = 0; i < 2; ++i) workers.push_back(cluster.start("worker", i, flags));
  for (auto& w : workers) {
    const ProcessResult r = w->wait();
    ASSERT_EQ(r.exit_code, 0) << all_output(r);
  }
  const ProcessResult ps_result = ps->wait(std::chrono::seconds(30));
  ASSERT_EQ(ps_result.exit_code, 0) << all_output(ps_result);
  const std::string ps_log = ps_result.out + ps_result.err;
  EXPECT_THAT(ps_log, HasSubstr("ps0: training finished at step 200; waiting up to 2 s "
                                "(--worker_timeout) for worker 2, which never connected"));
  EXPECT_THAT(ps_log, HasSubstr("ps0: worker 2 never connected within 2 s of the end of "
                                "training; ending without it"));
  const auto summary = testing::ps_summary(ps_result.out);
  ASSERT_TRUE(summary) << all_output(ps_result);
  EXPECT_EQ(summary->step, 200);
}

TEST(Reliability, SyncWithoutSparesContinuesWithFewerGradientsWhenTold) {
  SyncLoss run(2, 2, 1, {"--worker_timeout", "2", "--on_worker_loss", "continue"});
  ASSERT_TRUE(run.killed);
  const ProcessResult chief = run.workers[0]->wait();
  const ProcessResult ps_result = run.ps->wait();
  ASSERT_EQ(chief.exit_code, 0) << all_output(chief) << all_output(ps_result);
  ASSERT_EQ(ps_result.exit_code, 0) << all_output(ps_result);
  EXPECT_THAT(ps_result.out + ps_result.err,
              HasSubstr("ps0: worker 1 did not come back within 2 s; a step now "
                        "takes 1 gradients instead of 2 (--on_worker_loss "
                        "continue)"));
  const auto summary = testing::ps_summary(ps_result.out);
  ASSERT_TRUE(summary) << all_output(ps_result);
  EXPECT_EQ(summary->step, SyncLoss::kSteps);
  EXPECT_GT(test_accuracy(0, chief.out), 0.85) << all_output(chief);
}

TEST(Reliability, SyncWithoutSparesStopsWithAnErrorNamingTheLostWorkerByDefault) {
  SyncLoss run(2, 2, 1, {"--worker_timeout", "2"});
  ASSERT_TRUE(run.killed);
  const ProcessResult chief = run.workers[0]->wait();
  const ProcessResult ps_result = run.ps->wait();
  // Never a silent hang: both end, with the one reason.
  EXPECT_EQ(ps_result.exit_code, 1) << all_output(ps_result);
  EXPECT_EQ(chief.exit_code, 1) << all_output(chief);
  for (const ProcessResult* r : {&chief, &ps_result}) {
    EXPECT_THAT(r->err, HasSubstr("ps0: worker 1 was lost at step"));
    EXPECT_THAT(r->err, HasSubstr("--on_worker_loss stop"));
  }
}

// ---- killed while payloads move, on both transports ----

// An mlp 1000 units wide: 3.2 MB of gradients pushed and of values pulled a step, so that a kill
// often lands while they move (through memory: while the ps copies out of or into the worker).
std::vector<std::string> wide_mlp_flags() {
  return concat(with_flag(softmax_flags(), "--model", "mlp"), {"--hidden_units", "1000"});
}

class KilledDuringTransfers : public ::testing::TestWithParam<std::string> {};

TEST_P(KilledDuringTransfers, AKilledSyncWorkerIsNamedByThePsAndTheOtherWorker) {
  SyncLoss run(2, 2, 1, {"--worker_timeout", "2", "--transport", GetParam()}, wide_mlp_flags());
  ASSERT_TRUE(run.killed);
  const ProcessResult chief = run.workers[0]->wait();
  const ProcessResult ps_result = run.ps->wait();
  EXPECT_EQ(ps_result.exit_code, 1) << all_output(ps_result);
  EXPECT_EQ(chief.exit_code, 1) << all_output(chief);
  for (const ProcessResult* r : {&chief, &ps_result}) {
    EXPECT_THAT(r->err, HasSubstr("ps0: worker 1 was lost at step")) << all_output(*r);
  }
  EXPECT_THAT(all_output(ps_result), HasSubstr("ps0: lost worker 1 at step"));
}

TEST_P(KilledDuringTransfers, AKilledPsIsNamedByEveryWorker) {
  HandStartedCluster cluster(1, 2);
  // Async, so that both workers keep pushing; no checkpoint to come back from, and 5 s to
  // reconnect before they give up.
  const std::vector<std::string> flags =
      concat(with_flag(wide_mlp_flags(), "--log_every", "1"),
             {"--train_steps", "100000", "--peer_timeout", "5", "--transport", GetParam()});
  const auto ps = cluster.start("ps", 0, flags);
  std::vector<std::unique_ptr<DtrainProcess>> workers;
  for (int i = 0; i < 2; ++i) workers.push_back(cluster.start("worker", i, flags));
  const int64_t kill_at = fault_step("ps killed in transfers at global step", 20, 200);
  ASSERT_THAT(wait_for_global_step(*workers[0], kill_at), HasSubstr("worker=0"));
  ps->send_signal(SIGKILL);
  EXPECT_EQ(ps->wait().signal, SIGKILL);
  for (int i = 0; i < 2; ++i) {
    const ProcessResult r = workers[static_cast<size_t>(i)]->wait();
    EXPECT_EQ(r.exit_code, 1) << all_output(r);
    EXPECT_EQ(testing::count_lines_containing(r.out, "lost ps0 (localhost:"), 1) << all_output(r);
    EXPECT_THAT(r.err, HasSubstr("could not reconnect to ps0 at localhost:")) << all_output(r);
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, KilledDuringTransfers, ::testing::Values("tcp", "shm"),
                         [](const auto& info) { return info.param; });

// ---- 3. a killed chief comes back without re-initialising ----

TEST(Reliability, APsRestartedFromALargeCheckpointServesNoWorkerBeforeItIsRestored) {
  // 40 MB of checkpoint (a 3.2 M-parameter model and Adam's two slots): restoring it takes a
  // while, and the workers, reconnecting every few tens of milliseconds, knock throughout. A ps
  // that listened before it had restored told them it held no variables, and they gave up.
  testing::TempDir train_dir;
  HandStartedCluster cluster(1, 2);
  const std::vector<std::string> flags =
      concat(with_flag(with_flag(softmax_flags(), "--model", "mlp"), "--log_every", "1"),
             {"--hidden_units", "4096", "--optimizer", "adam", "--train_steps", "24", "--train_dir",
              train_dir.path().string(), "--save_steps", "8", "--peer_timeout", "60"});
  auto ps = cluster.start("ps", 0, flags);
  std::vector<std::unique_ptr<DtrainProcess>> workers;
  for (int i = 0; i < 2; ++i) workers.push_back(cluster.start("worker", i, flags));
  // The chief saves right after logging the step that crosses 8 (before its next step): a later
  // step line means the checkpoint is on disk.
  const std::string crossing = wait_for_global_step(*workers[0], 8);
  ASSERT_FALSE(crossing.empty());
  const int64_t crossed = std::stoll(crossing.substr(crossing.find("global_step=") + 12));
  ASSERT_FALSE(wait_for_global_step(*workers[0], crossed + 1).empty());
  ps->send_signal(SIGKILL);
  EXPECT_EQ(ps->wait().signal, SIGKILL);
  ps = cluster.start("ps", 0, flags);

  std::vector<ProcessResult> results;
  for (auto& w : workers) results.push_back(w->wait());
  const ProcessResult ps_result = ps->wait();
  ASSERT_EQ(ps_result.exit_code, 0) << all_output(ps_result);
  const auto restored = numbers_in(
      ps_result.out, R"(ps0: restored .*model\.ckpt-[0-9]+\.safetensors at global step ([0-9]+))");
  ASSERT_TRUE(restored) << all_output(ps_result);
  EXPECT_GT((*restored)[0], 0);
  for (size_t i = 0; i < results.size(); ++i) {
    const std::string& out = results[i].out;
    ASSERT_EQ(results[i].exit_code, 0)
        << "worker " << i << ": " << all_output(results[i]) << "\nps: " << all_output(ps_result);
    EXPECT_THAT(all_output(results[i]), Not(HasSubstr("without its variables")));
    // Async, the other worker can push the last of the 24 steps before the kill lands: it then
    // never lost ps0. The chief is the one whose step line the kill followed, a third of the way
    // in.
    if (i > 0 && out.find("lost ps0") == std::string::npos) continue;
    // A worker that had logged a step past the restored one reports the steps the restore lost.
    // One that had not may have seen no later step at all (the chief can save again before the
    // kill lands), and then it has simply reconnected.
    int64_t last_logged = 0;
    for (const Match& m :
         all_matches(out.substr(0, out.find("lost ps0")), R"(global_step=([0-9]+))"))
      last_logged = std::stoll(m[1]);
    if (last_logged > (*restored)[0]) {
      EXPECT_THAT(out, HasSubstr("ps0 is back after")) << "worker " << i;
    } else {
      EXPECT_THAT(out, AnyOf(HasSubstr("ps0 is back after"), HasSubstr("reconnected to ps0 after")))
          << "worker " << i;
    }
  }
  const auto summary = testing::ps_summary(ps_result.out);
  ASSERT_TRUE(summary) << all_output(ps_result);
  EXPECT_GE(summary->step, 24);
}

TEST(Reliability, KilledChiefComesBackWithoutReinitialisingTheVariables) {
  constexpr int kSteps = 600;
  testing::TempDir train_dir;
  HandStartedCluster cluster(1, 2);
  const std::vector<std::string> flags =
      concat(with_flag(softmax_flags(), "--log_every", "1"),
             {"--sync_replicas", "--train_steps", std::to_string(kSteps), "--train_dir",
              train_dir.path().string(), "--save_steps", "50", "--peer_timeout", "60"});
  const auto ps = cluster.start("ps", 0, flags);
  auto chief = cluster.start("worker", 0, flags);
  const auto worker = cluster.start("worker", 1, flags);

  const int64_t kill_at = fault_step("chief killed at global step", 50, 400);
  ASSERT_THAT(chief->wait_for_line(fmt::format("global_step={},", kill_at)), HasSubstr("worker=0"));
  chief->send_signal(SIGKILL);
  EXPECT_EQ(chief->wait().signal, SIGKILL);
  // Worker 1 waits in its step for the chief's gradient meanwhile (sync, R = 2).
  chief = cluster.start("worker", 0, flags);
  const ProcessResult chief_result = chief->wait();
  const ProcessResult worker_result = worker->wait();
  const ProcessResult ps_result = ps->wait();
  ASSERT_EQ(chief_result.exit_code, 0) << all_output(chief_result);
  ASSERT_EQ(worker_result.exit_code, 0) << all_output(worker_result);
  ASSERT_EQ(ps_result.exit_code, 0) << all_output(ps_result);

  EXPECT_THAT(chief_result.out,
              HasSubstr("worker0: the ps tasks already hold the variables; not re-initialising"));
  EXPECT_THAT(chief_result.out, Not(HasSubstr("restored")));
  // It carried on from where the ps tasks were, not from a checkpoint or from zero.
  const auto first_step = numbers_in(chief_result.out, R"(global_step=([0-9]+), local_step=1,)");
  ASSERT_TRUE(first_step) << all_output(chief_result);
  EXPECT_GT((*first_step)[0], kill_at);
  // Nothing was lost: every step applied once on each of the two shards. (A chief killed between
  // its two shards' frames leaves one shard a step ahead of the other for the rest of the run.)
  const auto summary = testing::ps_summary(ps_result.out);
  ASSERT_TRUE(summary) << all_output(ps_result);
  EXPECT_GE(summary->step, kSteps);
  EXPECT_LE(summary->step, kSteps + 1);
  EXPECT_GE(summary->applied, 2 * kSteps);
  EXPECT_LE(summary->applied, 2 * kSteps + 1);
  EXPECT_GT(test_accuracy(0, chief_result.out), 0.85) << all_output(chief_result);
}

// ---- the local launcher restarts crashed tasks by itself ----

TEST(Reliability, LocalLauncherRestartsAKilledPsAndTheRunCompletes) {
  testing::TempDir train_dir;
  const std::vector<std::string> flags = concat(
      with_flag(softmax_flags(), "--log_every", "1"),
      {"--train_steps", "1500", "--train_dir", train_dir.path().string(), "--save_steps", "50"});
  DtrainProcess launcher(
      concat({"train", "--strategy", "sync", "--ps", "1", "--workers", "2", "--max_restarts", "1"},
             flags));
  const int64_t kill_at = fault_step("launcher's ps killed at global step", 120, 800);
  if (launcher.wait_for_line(fmt::format("global_step={},", kill_at)).empty())
    FAIL() << "no step " << kill_at << ": " << all_output(launcher.wait());
  const pid_t ps = testing::child_with_arguments(launcher.pid(), {"--job_name", "ps"});
  ASSERT_GT(ps, 0);
  ASSERT_EQ(::kill(ps, SIGKILL), 0);
  const ProcessResult r = launcher.wait();
  ASSERT_EQ(r.exit_code, 0) << all_output(r);
  EXPECT_THAT(r.out, HasSubstr("[launcher] ps0 was killed by signal 9 (Killed); starting it "
                               "again (restart 1 of 1)"));
  EXPECT_THAT(r.out, HasSubstr("[ps0] ps0: restored"));
  EXPECT_EQ(testing::count_lines_containing(r.out, "is back after"), 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("ps0: done at global step 1500"));
}

}  // namespace
}  // namespace dtrain
