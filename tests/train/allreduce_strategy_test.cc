// AllreduceStrategy's workers as threads of this process over a MemoryRing: they end with bit-
// identical parameters, and with the very parameters that worker processes over TCP reach on the
// same data and flags, since the transport only moves bytes and every rank's arithmetic (the
// chunks, their order, the buckets) depends on the ring's size and the flags alone.
#include "train/allreduce_strategy.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <exception>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "collective/memory_ring.h"
#include "data/feature_scale.h"
#include "plan/recipes.h"
#include "plan/recorded_settings.h"
#include "plan/run_plan.h"
#include "support/process.h"
#include "support/ps_cluster.h"
#include "support/temp_dir.h"
#include "support/text_match.h"
#include "train/training_input.h"
#include "train/training_loop.h"
#include "train/training_state.h"

namespace dtrain {
namespace {

using testing::all_matches;
using testing::all_output;
using testing::Match;
using testing::ProcessResult;

// 16 features in [0, 1); the label's own feature among the first three is raised by 1, so a few
// steps learn it.
void write_examples(const std::filesystem::path& path, int rows, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> feature(0.0f, 1.0f);
  std::string text;
  for (int r = 0; r < rows; ++r) {
    const int label = static_cast<int>(rng() % 3);
    for (int i = 0; i < 16; ++i) text += fmt::format("{},", feature(rng) + (i == label ? 1 : 0));
    text += fmt::format("{}\n", label);
  }
  testing::write_bytes(path, text);
}

constexpr const char* kModel =
    R"({"class_name": "Sequential", "config": {"name": "tiny", "layers": [
  {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 16], "name": "in"}},
  {"class_name": "Dense", "config": {"name": "hidden", "units": 8, "activation": "tanh"}},
  {"class_name": "Dense", "config": {"name": "out", "units": 3, "activation": "softmax"}}]}})";

class AllreduceStrategyTest : public ::testing::Test {
 protected:
  AllreduceStrategyTest() {
    testing::write_bytes(work_ / "model.json", kModel);
    write_examples(work_ / "train.csv", 320, 1);
    write_examples(work_ / "test.csv", 64, 2);
  }

  // The flags of a `dtrain train` run, without the strategy's.
  std::vector<std::string> flags() const {
    return {"--model",         (work_ / "model.json").string(),
            "--train_data",    (work_ / "train.csv").string(),
            "--test_data",     (work_ / "test.csv").string(),
            "--batch_size",    "8",
            "--train_steps",   "25",
            "--learning_rate", "0.3",
            "--fusion_bytes",  std::to_string(kFusionBytes),
            "--threads",       "1",
            "--log_every",     "0"};
  }

  // What the CLI makes of flags(): the model's recipe, and a user's files trained on whole.
  TrainConfig config() const {
    TrainConfig c = recipe_for((work_ / "model.json").string());
    c.model.name = (work_ / "model.json").string();
    c.train_data = (work_ / "train.csv").string();
    c.test_data = (work_ / "test.csv").string();
    c.validation_size = 0;
    c.batch_size = 8;
    c.train_steps = 25;
    c.learning_rate = 0.3f;
    c.threads = 1;
    c.log_every = 0;
    c.recorder = &settings_record();
    return c;
  }

  // Runs `workers` strategies on threads over one MemoryRing; returns what each printed.
  std::vector<std::string> run_in_threads(const TrainConfig& train, int workers,
                                          size_t fusion_bytes = kFusionBytes) {
    validate_train_config(train);
    std::vector<HostPort> addresses;
    for (int r = 0; r < workers; ++r) addresses.push_back({"127.0.0.1", uint16_t(20000 + r)});
    const ClusterSpec cluster({{std::string(kWorkerJob), addresses}});
    MemoryRing ring(workers, 20'000);
    std::vector<std::unique_ptr<RingConnector>> connectors;
    for (int r = 0; r < workers; ++r) connectors.push_back(ring.connector(r));
    std::vector<std::ostringstream> outs(static_cast<size_t>(workers));
    ring.run([&](int rank) {
      AllreduceClusterConfig config;
      config.cluster = {.cluster = cluster, .task = {std::string(kWorkerJob), rank}};
      config.fusion_bytes = fusion_bytes;
      const TrainingInput input(train);
      TrainingState state(train);
      std::ostream& out = outs[static_cast<size_t>(rank)];
      AllreduceStrategy strategy(train, config, state, input,
                                 std::move(connectors[static_cast<size_t>(rank)]), out);
      try {
        run_training_loop(train, input, state, strategy, out);
      } catch (const std::exception& error) {
        strategy.abort(error.what());
        throw;
      }
    });
    std::vector<std::string> printed;
    for (const std::ostringstream& out : outs) printed.push_back(out.str());
    return printed;
  }

  static constexpr size_t kFusionBytes = 256;  // the 163 parameters in several buckets
  testing::TempDir work_;
};

std::string joined(const std::vector<std::string>& printed) {
  std::string all;
  for (const std::string& out : printed) all += out;
  return all;
}

// rank -> what `pattern`'s group 2 captured on the rank named by group 1, over all lines.
std::map<int, std::string> by_rank(const std::string& out, const std::string& pattern) {
  std::map<int, std::string> found;
  for (const Match& line : all_matches(out, pattern)) found[std::stoi(line[1])] = line[2];
  return found;
}

const std::string kCrc = R"(worker=([0-9]+): parameters crc32c = (0x[0-9A-F]{8}))";
const std::string kFingerprint =
    R"(worker([0-9]+): allreduce training .* fingerprint ([0-9a-f]{16}))";

TEST_F(AllreduceStrategyTest, TheFingerprintCoversWhatACheckpointRecordsButNotAWorkersOwnFiles) {
  const TrainConfig base = config();
  const TrainingInput input(base);
  TrainingState state(base);
  const AllreduceClusterConfig cluster;
  auto fingerprint = [&](const TrainConfig& c) {
    return agreed_settings(c, cluster, state.model(), state.params(), input, 25).dump();
  };
  const std::string agreed = fingerprint(base);
  // Recorded by checkpoints (train_config_json) and so agreed, with no line of its own in the
  // fingerprint: the feature scale, the held-out examples, the learning rate.
  TrainConfig scaled = base;
  scaled.data_options.feature_scale = parse_feature_scale("1/2");
  EXPECT_NE(fingerprint(scaled), agreed);
  TrainConfig held_out = base;
  held_out.validation_size = 10;
  EXPECT_NE(fingerprint(held_out), agreed);
  TrainConfig faster = base;
  faster.learning_rate = 0.5f;
  EXPECT_NE(fingerprint(faster), agreed);
  TrainConfig bf16 = base;
  bf16.precision = Precision::kBf16;
  EXPECT_NE(fingerprint(bf16), agreed);
  // Only the ring's: what may stop the run early.
  TrainConfig patient = base;
  patient.early_stopping_patience = 3;
  EXPECT_NE(fingerprint(patient), agreed);
  // Each worker's own: where its files lie (the examples are compared, not their names), towers.
  TrainConfig elsewhere = base;
  elsewhere.test_data = (work_ / "elsewhere.csv").string();
  elsewhere.towers = 2;
  EXPECT_EQ(fingerprint(elsewhere), agreed);
}

TEST_F(AllreduceStrategyTest, FourThreadsEndBitForBitWhereFourWorkerProcessesEnd) {
  const std::string joined = dtrain::joined(run_in_threads(config(), 4));
  const std::map<int, std::string> crcs = by_rank(joined, kCrc);
  ASSERT_EQ(crcs.size(), 4u) << joined;
  EXPECT_EQ(std::set<std::string>({crcs.at(0), crcs.at(1), crcs.at(2), crcs.at(3)}).size(), 1u)
      << joined;
  EXPECT_EQ(testing::count_lines_containing(joined, "(left): memory; to worker"), 4) << joined;
  // Their links are in memory: no address to report.
  EXPECT_EQ(testing::count_lines_containing(joined, "listening on"), 0) << joined;
  // Several buckets, so that one left out, reduced twice or misplaced would show below.
  EXPECT_EQ(testing::count_lines_containing(joined, "global steps, 3 fusion bucket(s)"), 4)
      << joined;

  const ProcessResult processes = testing::run_dtrain(
      testing::concat({"train", "--strategy", "allreduce", "--workers", "4"}, flags()));
  ASSERT_EQ(processes.exit_code, 0) << all_output(processes);
  // The same settings, as the ring's fingerprint hashes them (model, data, schedule, buckets) ...
  EXPECT_EQ(by_rank(processes.out, kFingerprint), by_rank(joined, kFingerprint))
      << processes.out << joined;
  // ... and the same parameters to the bit.
  EXPECT_EQ(by_rank(processes.out, kCrc), crcs) << processes.out;
}

// Rank 0 draws the initial weights and broadcasts them with Adam's two slots per parameter; the
// buckets cut the hidden kernel (128 floats) into pieces. One bit of drift shows in the CRCs.
TEST_F(AllreduceStrategyTest, ThreeThreadsWithAdamAndFusionBucketsEndBitwiseIdentical) {
  TrainConfig train = config();
  train.optimizer.name = "adam";
  train.learning_rate = 0.01f;
  const std::vector<std::string> printed = run_in_threads(train, 3, 64);
  const std::string all = joined(printed);
  const std::map<int, std::string> crcs = by_rank(all, kCrc);
  ASSERT_EQ(crcs.size(), 3u) << all;
  EXPECT_EQ(std::set<std::string>({crcs.at(0), crcs.at(1), crcs.at(2)}).size(), 1u) << all;
  for (const std::string& out : printed) {
    EXPECT_EQ(testing::count_lines_containing(out, "global steps, 12 fusion bucket(s)"), 1) << out;
    EXPECT_EQ(testing::count_lines_containing(out, "(25 local steps, "), 1) << out;
    EXPECT_EQ(testing::count_lines_containing(out, ": test accuracy = 0."), 1) << out;
  }
}

// With two ranks each element's average is (a + b) / 2 whichever rank reduces it, so cutting the
// arena into buckets must change nothing: a bucket left out, reduced twice or misplaced would show
// in the parameters.
TEST_F(AllreduceStrategyTest, FusionBucketsAverageBitForBitLikeOneBuffer) {
  const std::string fused = joined(run_in_threads(config(), 2, 64));
  const std::string whole = joined(run_in_threads(config(), 2, 0));
  EXPECT_EQ(testing::count_lines_containing(whole, "global steps, 1 fusion bucket(s)"), 2) << whole;
  EXPECT_EQ(testing::count_lines_containing(fused, "global steps, 12 fusion bucket(s)"), 2)
      << fused;
  const std::map<int, std::string> crcs = by_rank(whole, kCrc);
  ASSERT_EQ(crcs.size(), 2u) << whole;
  EXPECT_EQ(crcs.at(0), crcs.at(1)) << whole;
  EXPECT_EQ(by_rank(fused, kCrc), crcs) << fused;
}

// rank -> the step a line matching `pattern` (rank, then step) names.
std::map<int, int> steps_by_rank(const std::string& out, const std::string& pattern) {
  std::map<int, int> steps;
  for (const auto& [rank, step] : by_rank(out, pattern)) steps[rank] = std::stoi(step);
  return steps;
}

// Rank 0 evaluates; both must leave the loop at the same step, or the other would wait in its
// next all-reduce.
TEST_F(AllreduceStrategyTest, TargetAccuracyStopsEveryWorkerAtTheSameStep) {
  TrainConfig train = config();
  train.validation_size = 64;
  train.train_steps = 0;
  train.epochs = 3;
  train.eval_every = 5;
  train.target_accuracy = 0.7;
  const std::string all = joined(run_in_threads(train, 2));
  const std::map<int, int> steps =
      steps_by_rank(all, R"(worker=([0-9]): target accuracy 0.7 reached at step ([0-9]+))");
  ASSERT_EQ(steps.size(), 2u) << all;
  EXPECT_EQ(steps.at(0), steps.at(1));
  EXPECT_LT(steps.at(0), 3 * 16) << "stopped only at the end of the epochs";
  EXPECT_EQ(steps.at(0) % 5, 0);
  const std::map<int, std::string> crcs = by_rank(all, kCrc);
  ASSERT_EQ(crcs.size(), 2u) << all;
  EXPECT_EQ(crcs.at(0), crcs.at(1)) << all;
}

TEST_F(AllreduceStrategyTest,
       EarlyStoppingStopsEveryWorkerAtTheSameStepAndEachTestsTheBestWeights) {
  // The rate jumps to 50 after step 10 (a piecewise schedule): the validation loss soars, and a
  // patience of 2 runs out two evaluations after the best.
  TrainConfig train = config();
  train.optimizer.name = "sgd";
  train.validation_size = 64;
  train.train_steps = 200;
  train.eval_every = 5;
  train.early_stopping_patience = 2;
  train.lr_schedule = LrDecay::kPiecewise;
  train.lr_boundaries = {10};
  train.lr_values = {0.5f, 50.0f};
  const std::string all = joined(run_in_threads(train, 2));
  const std::map<int, int> stopped =
      steps_by_rank(all, R"(worker=([0-9]): early stopping at step ([0-9]+))");
  const std::map<int, int> best =
      steps_by_rank(all, R"(worker=([0-9]): restored the weights of step ([0-9]+))");
  const std::map<int, std::string> tested =
      by_rank(all, R"(worker=([0-9]): test accuracy = ([0-9.]+))");
  ASSERT_EQ(stopped.size(), 2u) << all;
  EXPECT_EQ(stopped.at(0), stopped.at(1));
  EXPECT_LE(stopped.at(0), 30) << all;
  ASSERT_EQ(best.size(), 2u) << all;
  EXPECT_EQ(best.at(0), best.at(1));
  EXPECT_EQ(best.at(0) + 10, stopped.at(0)) << all;
  ASSERT_EQ(tested.size(), 2u) << all;
  EXPECT_EQ(tested.at(0), tested.at(1)) << "both tested the same, best, weights";
  // The best weights score 0.83 here (measured), the last ones about 0.3.
  EXPECT_GT(std::stod(tested.at(0)), 0.75) << all;
  const std::map<int, std::string> crcs = by_rank(all, kCrc);
  ASSERT_EQ(crcs.size(), 2u) << all;
  EXPECT_EQ(crcs.at(0), crcs.at(1)) << all;
}

}  // namespace
}  // namespace dtrain
