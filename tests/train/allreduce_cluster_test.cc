// All-reduce training end to end: real dtrain processes over loopback (the local launcher, or
// worker tasks started one by one). Every worker ends with bitwise identical parameters, with one
// buffer or with fusion buckets; two workers compute what local training on the combined batch
// computes; a resumed run continues from the chief's checkpoint on every worker; a killed worker
// fails the others by name, and a worker with another model is refused by name. First, the cut of
// the fusion buckets, as a pure function.
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
#include "cluster/local_launcher.h"
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

// ---- fusion buckets ----

ParamSet layout_of(const std::string& model_name) {
  ModelConfig config;
  config.name = model_name;
  return ParamSet(make_model(config)->param_specs());
}

// Where tensor i's extent ends: the next tensor's start, or the arena's end (its padding is its).
size_t extent_end(const ParamSet& layout, size_t i) {
  return i + 1 < layout.count() ? layout.offset(i + 1) : layout.flat().size();
}

TEST(FusionBuckets, ZeroMeansOneBucketOverTheWholeArena) {
  const ParamSet layout = layout_of("mnist_inference");
  EXPECT_EQ(fusion_buckets(layout, 0),
            (std::vector<ArenaSlice>{{.begin = 0, .size = layout.flat().size()}}));
}

TEST(FusionBuckets, ALargeTensorIsCutAndItsLastPieceSharedWithTheNext) {
  // softmax: w (784 x 10 = 7840 floats), then b (10 floats and its padding).
  const ParamSet layout = layout_of("softmax");
  ASSERT_EQ(layout.count(), 2u);
  ASSERT_EQ(layout.offset(1), 7840u);
  const size_t arena = layout.flat().size();
  // 4 KiB = 1024 floats: seven whole pieces of w, then w's last 672 floats together with b.
  std::vector<ArenaSlice> expected;
  for (size_t begin = 0; begin < 7168; begin += 1024) expected.push_back({begin, 1024});
  expected.push_back({7168, arena - 7168});
  EXPECT_EQ(fusion_buckets(layout, 4096), expected);
}

TEST(FusionBuckets, BucketsCoverTheArenaInOrderAndKeepTensorsThatFitWhole) {
  for (const std::string model : {"softmax", "mlp", "mnist_inference", "lenet"}) {
    const ParamSet layout = layout_of(model);
    for (const size_t bytes : {size_t{4}, size_t{1000}, size_t{4096}, size_t{40'000},
                               size_t{1'000'000}, size_t{1} << 30}) {
      SCOPED_TRACE(fmt::format("{}, fusion_bytes {}", model, bytes));
      const std::vector<ArenaSlice> buckets = fusion_buckets(layout, bytes);
      size_t next = 0;
      for (const ArenaSlice& bucket : buckets) {
        EXPECT_EQ(bucket.begin, next);
        EXPECT_GT(bucket.size, 0u);
        EXPECT_LE(bucket.size * sizeof(float), bytes);
        next = bucket.begin + bucket.size;
      }
      EXPECT_EQ(next, layout.flat().size());
      // A tensor whose extent fits in a bucket lies within one.
      for (size_t i = 0; i < layout.count(); ++i) {
        const size_t begin = layout.offset(i), end = extent_end(layout, i);
        if ((end - begin) * sizeof(float) > bytes) continue;
        EXPECT_TRUE(std::any_of(
            buckets.begin(), buckets.end(),
            [&](const ArenaSlice& b) { return b.begin <= begin && end <= b.begin + b.size; }))
            << "tensor " << layout.spec(i).name << " is split";
      }
    }
  }
}

// ---- processes ----

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

// worker rank -> the CRC32C of its parameters, from the workers' closing lines.
std::map<int, std::string> parameter_crcs(const std::string& out) {
  std::map<int, std::string> crcs;
  for (const Match& line :
       all_matches(out, R"(worker=([0-9]+): parameters crc32c = (0x[0-9A-F]{8}))"))
    crcs[std::stoi(line[1])] = line[2];
  return crcs;
}

// Asserts that `workers` workers each reported their parameters and all alike; returns the CRC.
std::string identical_parameters(const ProcessResult& r, int workers) {
  const std::map<int, std::string> crcs = parameter_crcs(r.out);
  EXPECT_EQ(crcs.size(), static_cast<size_t>(workers)) << all_output(r);
  std::set<std::string> distinct;
  for (const auto& [rank, crc] : crcs) distinct.insert(crc);
  EXPECT_EQ(distinct.size(), 1u) << all_output(r);
  return crcs.empty() ? "" : crcs.begin()->second;
}

// The fusion buckets each worker reported in its start-up line.
std::vector<int> bucket_counts(const std::string& out) {
  std::vector<int> counts;
  for (const Match& line : all_matches(out, R"(allreduce training of .* ([0-9]+) fusion bucket)"))
    counts.push_back(std::stoi(line[1]));
  return counts;
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

TEST(AllreduceCluster, ThreeWorkersWithAdamAndFusionBucketsEndBitwiseIdentical) {
  // mlp starts from random weights that rank 0 draws and broadcasts, and Adam keeps two slots per
  // parameter; 64 KiB buckets cut hid_w (306 KiB) into pieces.
  const ProcessResult r =
      run_dtrain(launch(3, {"--model", "mlp", "--optimizer", "adam", "--threads", "1",
                            "--batch_size", "30", "--train_steps", "100", "--fusion_bytes", "65536",
                            "--data_dir", testing::mnist_dir().string(), "--log_every", "50"}));
  ASSERT_EQ(r.exit_code, 0) << all_output(r);
  identical_parameters(r, 3);
  const std::vector<int> buckets = bucket_counts(r.out);
  ASSERT_EQ(buckets.size(), 3u) << r.out;
  for (const int n : buckets) EXPECT_GT(n, 1) << r.out;
  EXPECT_EQ(testing::count_lines_containing(r.out, "global_step=100, local_step=100"), 3) << r.out;
  EXPECT_EQ(testing::count_lines_containing(r.out, ": test accuracy = 0."), 3) << r.out;
}

// The same run through memory and over TCP: the same parameters to the bit, and each worker says
// which way its chunks went.
TEST(AllreduceCluster, ChunksThroughMemoryTrainBitForBitAsOverTcp) {
  const std::vector<std::string> common = concat(model_flags("mlp"), {"--train_steps", "60"});
  std::string crc[2];
  const char* transports[] = {"tcp", "shm"};
  for (int i = 0; i < 2; ++i) {
    const ProcessResult r = run_dtrain(launch(2, concat(common, {"--transport", transports[i]})));
    ASSERT_EQ(r.exit_code, 0) << all_output(r);
    crc[i] = identical_parameters(r, 2);
    const std::string line = i == 0 ? "(left): tcp; to worker"
                                    : "(left): shm (copied out of the sender's memory, announced "
                                      "through a shared mailbox); to worker";
    EXPECT_EQ(testing::count_lines_containing(r.out, line), 2) << r.out;
  }
  EXPECT_EQ(crc[0], crc[1]);
}

TEST(AllreduceCluster, FusionBucketsAverageBitForBitLikeOneBuffer) {
  // With two ranks each element's average is (a + b) / 2 whichever rank reduces it, so cutting
  // the arena into buckets must change nothing: a bucket left out, reduced twice or misplaced
  // would show in the parameters.
  const std::vector<std::string> flags = concat(softmax_flags(), {"--train_steps", "100"});
  DtrainProcess one_buffer(launch(2, flags));
  const ProcessResult fused = run_dtrain(launch(2, concat(flags, {"--fusion_bytes", "4096"})));
  const ProcessResult whole = one_buffer.wait();
  ASSERT_EQ(fused.exit_code, 0) << all_output(fused);
  ASSERT_EQ(whole.exit_code, 0) << all_output(whole);
  EXPECT_EQ(bucket_counts(fused.out), (std::vector<int>{8, 8})) << fused.out;
  EXPECT_EQ(bucket_counts(whole.out), (std::vector<int>{1, 1})) << whole.out;
  EXPECT_EQ(identical_parameters(fused, 2), identical_parameters(whole, 2));
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

TEST(AllreduceCluster, TargetAccuracyStopsEveryWorkerAtTheSameStep) {
  const ProcessResult r =
      run_dtrain(launch(2, concat(softmax_flags(), {"--epochs", "3", "--eval_every", "20",
                                                    "--target_accuracy", "0.85"})));
  ASSERT_EQ(r.exit_code, 0) << all_output(r);
  std::map<int, int> steps;
  for (const Match& line :
       all_matches(r.out, R"(worker=([0-9]): target accuracy 0.85 reached at step ([0-9]+))"))
    steps[std::stoi(line[1])] = std::stoi(line[2]);
  ASSERT_EQ(steps.size(), 2u) << r.out;
  EXPECT_EQ(steps[0], steps[1]);
  EXPECT_LT(steps[0], 3 * 275) << "stopped only at the end of the epochs";
  EXPECT_EQ(steps[0] % 20, 0);
  identical_parameters(r, 2);
}

TEST(AllreduceCluster, EarlyStoppingStopsEveryWorkerAtTheSameStepAndEachTestsTheBestWeights) {
  // The rate jumps to 20 after step 40 (a piecewise schedule): the validation loss soars, and a
  // patience of 2 runs out two evaluations after the best.
  const ProcessResult r = run_dtrain(
      launch(2, concat(softmax_flags(),
                       {"--train_steps", "400", "--eval_every", "20", "--early_stopping_patience",
                        "2", "--moving_average_decay", "0", "--lr_schedule", "piecewise",
                        "--lr_boundaries", "40", "--lr_values", "0.5,20"})));
  ASSERT_EQ(r.exit_code, 0) << all_output(r);
  std::map<int, int> stopped, best;
  std::map<int, std::string> tested;
  for (const Match& line : all_matches(r.out, R"(worker=([0-9]): early stopping at step ([0-9]+))"))
    stopped[std::stoi(line[1])] = std::stoi(line[2]);
  for (const Match& line :
       all_matches(r.out, R"(worker=([0-9]): restored the weights of step ([0-9]+))"))
    best[std::stoi(line[1])] = std::stoi(line[2]);
  for (const Match& line : all_matches(r.out, R"(worker=([0-9]): test accuracy = ([0-9.]+))"))
    tested[std::stoi(line[1])] = line[2];
  ASSERT_EQ(stopped.size(), 2u) << r.out;
  EXPECT_EQ(stopped[0], stopped[1]);
  EXPECT_LE(stopped[0], 80) << r.out;
  ASSERT_EQ(best.size(), 2u) << r.out;
  EXPECT_EQ(best[0], best[1]);
  EXPECT_EQ(best[0] + 40, stopped[0]) << r.out;
  ASSERT_EQ(tested.size(), 2u) << r.out;
  EXPECT_EQ(tested[0], tested[1]) << "both tested the same, best, weights";
  EXPECT_GT(std::stod(tested[0]), 0.8) << r.out;
  identical_parameters(r, 2);
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
