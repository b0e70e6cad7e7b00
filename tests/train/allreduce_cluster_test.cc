// All-reduce training end to end: real dtrain processes over loopback (the local launcher, or
// worker tasks started one by one). Every worker ends with bitwise identical parameters, through
// memory or over TCP; two workers compute what local training on the combined batch computes; a
// resumed run continues from the chief's checkpoint on every worker; a killed worker fails the
// others by name, and a worker with another model is refused by name. What needs no process (Adam
// and fusion buckets, stopping together at a target or early) is tested on threads in
// allreduce_strategy_test.cc.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "ckpt/checkpoint_manager.h"
#include "nn/model_zoo.h"
#include "nn/param_set.h"
#include "support/checkpoints.h"
#include "support/process.h"
#include "support/ps_cluster.h"
#include "support/temp_dir.h"
#include "support/text_match.h"
#include "train/allreduce_trainer.h"

namespace dtrain {
namespace {

using testing::all_matches;
using testing::all_output;
using testing::concat;
using testing::DtrainProcess;
using ::testing::HasSubstr;
using testing::Match;
using testing::ProcessResult;
using testing::run_dtrain;

// The flags every process of these tests shares: a small model on one thread, quiet.
std::vector<std::string> model_flags(const std::string& model, int log_every = 0) {
  return {"--model",     model,
          "--threads",   "1",
          "--data_dir",  testing::mnist_dir().string(),
          "--log_every", std::to_string(log_every)};
}
std::vector<std::string> softmax_flags() { return model_flags("softmax"); }

std::vector<std::string> launch(int workers, const std::vector<std::string>& flags) {
  return concat({"train", "--strategy", "allreduce", "--workers", std::to_string(workers)}, flags);
}

// Asserts that `workers` workers each reported their parameters and all alike; returns the CRC.
std::string identical_parameters(const ProcessResult& r, int workers) {
  const std::map<int, std::string> crcs = testing::parameter_crcs(r.out);
  EXPECT_EQ(crcs.size(), static_cast<size_t>(workers)) << all_output(r);
  std::set<std::string> distinct;
  for (const auto& [rank, crc] : crcs) distinct.insert(crc);
  EXPECT_EQ(distinct.size(), 1u) << all_output(r);
  return crcs.empty() ? "" : crcs.begin()->second;
}

using testing::newest_checkpoint;

TEST(AllreduceCluster, TwoWorkersMatchLocalTrainingOnTheCombinedBatch) {
  testing::TempDir allreduce_dir, local_dir, half_batch_dir;
  const std::vector<std::string> common = concat(softmax_flags(), {"--train_steps", "100"});
  // The controls run beside the cluster: the whole batch, and half of it (which must not match).
  DtrainProcess local(
      concat({"train", "--batch_size", "100", "--train_dir", local_dir.path().string()}, common));
  DtrainProcess half_batch(concat(
      {"train", "--batch_size", "50", "--train_dir", half_batch_dir.path().string()}, common));
  const ProcessResult cluster = run_dtrain(launch(
      2, concat({"--batch_size", "50", "--train_dir", allreduce_dir.path().string()}, common)));
  ASSERT_EQ(cluster.exit_code, 0) << all_output(cluster);
  const ProcessResult local_run = local.wait();
  ASSERT_EQ(local_run.exit_code, 0) << all_output(local_run);
  const ProcessResult half_run = half_batch.wait();
  ASSERT_EQ(half_run.exit_code, 0) << all_output(half_run);

  identical_parameters(cluster, 2);
  // The same 100 examples per step in the same order from the same initialisation; only rounding
  // differs: (mean of 50 + mean of 50) / 2 against one mean of 100, and the local trainer folds
  // SGD into its weight-gradient product where allreduce applies the averaged gradient in a pass
  // of its own. The ps strategies' identical test observed under 1e-7 after 50 steps.
  testing::expect_same_training_as_the_combined_batch(
      newest_checkpoint(allreduce_dir.path()), newest_checkpoint(local_dir.path()),
      newest_checkpoint(half_batch_dir.path()), 100);
}

// The same run through memory and over TCP: the same parameters to the bit, and each worker says
// which way its chunks went (over TCP, with the congestion control its sockets run).
TEST(AllreduceCluster, ChunksThroughMemoryTrainBitForBitAsOverTcp) {
  const std::vector<std::string> common = concat(model_flags("mlp"), {"--train_steps", "60"});
  std::string crc[2];
  const char* transports[] = {"tcp", "shm"};
  for (int i = 0; i < 2; ++i) {
    const ProcessResult r = run_dtrain(
        launch(2, concat(common, {"--transport", transports[i], "--tcp_congestion", "reno"})));
    ASSERT_EQ(r.exit_code, 0) << all_output(r);
    crc[i] = identical_parameters(r, 2);
    const std::string line = i == 0 ? "(left): tcp (congestion control reno); to worker"
                                    : "(left): shm (copied out of the sender's memory, announced "
                                      "through a shared mailbox); to worker";
    EXPECT_EQ(testing::count_lines_containing(r.out, line), 2) << r.out;
  }
  EXPECT_EQ(crc[0], crc[1]);
}

TEST(AllreduceCluster, ResumedRunContinuesFromTheChiefsCheckpointOnEveryWorker) {
  // Momentum and a moving average: rank 0 restores its slots and broadcasts them with the
  // parameters, or worker 1 would restart with no momentum and drift apart from rank 0.
  testing::TempDir straight_dir, resumed_dir;
  const std::vector<std::string> flags = concat(softmax_flags(), {"--optimizer", "momentum"});
  auto run = [&](const testing::TempDir& dir, int steps) {
    return launch(2, concat(flags, {"--train_steps", std::to_string(steps), "--train_dir",
                                    dir.path().string()}));
  };
  DtrainProcess straight(run(straight_dir, 80));
  const ProcessResult first = run_dtrain(run(resumed_dir, 40));
  ASSERT_EQ(first.exit_code, 0) << all_output(first);
  const ProcessResult second = run_dtrain(run(resumed_dir, 80));
  ASSERT_EQ(second.exit_code, 0) << all_output(second);
  const ProcessResult whole = straight.wait();
  ASSERT_EQ(whole.exit_code, 0) << all_output(whole);

  EXPECT_THAT(second.out, HasSubstr("at global step 40"));
  EXPECT_THAT(second.out, HasSubstr("worker=1: training elapsed time"));
  EXPECT_EQ(testing::count_lines_containing(second.out, "(40 local steps, "), 2) << second.out;
  EXPECT_EQ(identical_parameters(second, 2), identical_parameters(whole, 2));
}

// Worker tasks started by hand with `dtrain task`, on free loopback ports, so that the test can
// give one of them other flags or kill it.
// The line of text that says "dtrain: error:", or "".
std::string error_line(const std::string& err) {
  const size_t at = err.find("dtrain: error:");
  return at == std::string::npos ? "" : err.substr(at, err.find('\n', at) - at);
}

// Under both transports: through memory, the killed worker's neighbours may be copying out of its
// memory at that moment.
class KilledAllreduceWorker : public ::testing::TestWithParam<std::string> {};

TEST_P(KilledAllreduceWorker, FailsTheOthersNamingIt) {
  testing::HandStartedCluster cluster(0, 4);  // no ps tasks: an all-reduce ring
  // Far more steps than the test lasts, and a timeout a broken propagation would sit out: the
  // others must learn of the loss from the ring, not from their own clock. Worker 3 is no
  // neighbour of worker 1: it hears of the loss only from the abort passed round the ring.
  // mlp's 1.6 MB of gradients keep a step's chunks moving for a while.
  const std::vector<std::string> common = {
      "--train_steps", "10000000", "--collective_timeout", "60", "--transport", GetParam()};
  std::vector<std::unique_ptr<DtrainProcess>> workers;
  for (int i = 0; i < 4; ++i)
    workers.push_back(
        cluster.start("worker", i, concat(model_flags("mlp", i == 1 ? 1 : 0), common)));
  // Killed in the middle of training, at a step drawn from DTRAIN_FAULT_SEED.
  const int64_t kill_at = testing::fault_step("allreduce worker 1 killed at global step", 5, 300);
  ASSERT_THAT(workers[1]->wait_for_line(fmt::format("global_step={},", kill_at)),
              HasSubstr("worker=1"));
  workers[1]->send_signal(SIGKILL);
  const ProcessResult killed = workers[1]->wait();
  EXPECT_EQ(killed.signal, SIGKILL);

  for (const int i : {0, 2, 3}) {
    const ProcessResult r = workers[i]->wait();
    EXPECT_EQ(r.exit_code, 1) << "worker " << i << ": " << all_output(r);
    EXPECT_EQ(testing::count_lines_containing(r.err, "dtrain: error:"), 1) << r.err;
    EXPECT_THAT(error_line(r.err), HasSubstr("worker1")) << "worker " << i << ": " << r.err;
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, KilledAllreduceWorker, ::testing::Values("tcp", "shm"),
                         [](const auto& info) { return info.param; });

TEST(AllreduceCluster, WorkerWithAnotherModelIsRefusedNamingIt) {
  testing::HandStartedCluster cluster(0, 2);
  // A timeout no loaded machine comes near, so that worker 1 finds worker 0 still waiting; a
  // short grace, because worker 0 may be stopped where no step boundary comes (below).
  const std::vector<std::string> common = {
      "--train_steps", "100", "--collective_timeout", "60", "--shutdown_timeout", "2"};
  const auto worker0 = cluster.start("worker", 0, concat(model_flags("softmax"), common));
  // Its start-up line comes once it listens for its left neighbour, worker 1.
  ASSERT_THAT(worker0->wait_for_line("worker0: allreduce training of softmax"),
              HasSubstr("fingerprint"));
  const ProcessResult odd = cluster.start("worker", 1, concat(model_flags("mlp"), common))->wait();
  EXPECT_EQ(odd.exit_code, 1) << all_output(odd);
  // Either rank may be the first to refuse the other; whichever it is, no ring can form, so worker
  // 1 ends with the refusal at once rather than waiting out --collective_timeout for worker 0.
  const std::string line = error_line(odd.err);
  EXPECT_THAT(line, ::testing::ContainsRegex(
                        "refused (worker1|its left neighbour: 127.0.0.1:[0-9]+ \\(worker0\\))"));
  EXPECT_THAT(line, HasSubstr("runs another model or configuration"));
  EXPECT_THAT(line, Not(HasSubstr("did not join the ring")));
  // Worker 0 cannot train alone: worker 1 refused it too (it exits non-zero), or it is still
  // trying to reach worker 1 (it dies of the signal).
  worker0->send_signal(SIGTERM);
  const ProcessResult first = worker0->wait();
  EXPECT_NE(first.exit_code, 0) << all_output(first);
  EXPECT_EQ(testing::count_lines_containing(first.out, "parameters crc32c"), 0) << first.out;
}

}  // namespace
}  // namespace dtrain
