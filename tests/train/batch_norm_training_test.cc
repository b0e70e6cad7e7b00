// BatchNormalization trained under every strategy (DESIGN.md §2): each worker or tower normalises
// by its own slice of the global batch, and the moving statistics move by the average of the
// slices' deltas — all-reduced with the gradients, applied by the ps under sync, summed by the
// towers — so all-reduce, sync ps and local towers over the same slices end with the same
// moving statistics, equal on every all-reduce worker and saved in the chief's checkpoint. A
// binary head on tiny generated data, so the same run covers Dense(1, sigmoid) end to end.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "support/checkpoints.h"
#include "support/process.h"
#include "support/ps_cluster.h"
#include "support/temp_dir.h"
#include "support/text_match.h"

namespace dtrain {
namespace {

using testing::all_output;
using testing::concat;
using testing::DtrainProcess;
using ::testing::HasSubstr;
using testing::newest_checkpoint;
using testing::ProcessResult;
using testing::run_dtrain;

// 4x4 images whose label is 1 when the top half is brighter than the bottom half.
void write_images(const std::filesystem::path& path, int rows, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
  std::string text;
  for (int r = 0; r < rows; ++r) {
    float top = 0, bottom = 0;
    for (int i = 0; i < 16; ++i) {
      const float v = pixel(rng);
      (i < 8 ? top : bottom) += v;
      text += fmt::format("{},", v);
    }
    text += top > bottom ? "1\n" : "0\n";
  }
  testing::write_bytes(path, text);
}

// A convolution and a Dense, each followed by BatchNormalization, then a binary head. Momentum
// 0.5 moves the statistics far from their start in a few steps.
constexpr const char* kBatchNormModel =
    R"({"class_name": "Sequential", "config": {"name": "bn", "layers": [
  {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 16], "name": "in"}},
  {"class_name": "Reshape", "config": {"name": "image", "target_shape": [4, 4, 1]}},
  {"class_name": "Conv2D", "config": {"name": "conv", "filters": 3, "kernel_size": [3, 3],
   "padding": "same"}},
  {"class_name": "BatchNormalization", "config": {"name": "bn_conv", "axis": [3], "momentum": 0.5}},
  {"class_name": "Activation", "config": {"name": "relu", "activation": "relu"}},
  {"class_name": "Flatten", "config": {"name": "flat"}},
  {"class_name": "Dense", "config": {"name": "hidden", "units": 6}},
  {"class_name": "BatchNormalization", "config": {"name": "bn_dense", "momentum": 0.5}},
  {"class_name": "Dense", "config": {"name": "out", "units": 1, "activation": "sigmoid"}}]}})";

const std::vector<std::string> kStatistics = {"bn_conv/moving_mean", "bn_conv/moving_variance",
                                              "bn_dense/moving_mean", "bn_dense/moving_variance"};

TEST(BatchNormTraining, AllreduceAndSyncPsAverageTheMovingStatisticsAsTowersDoAndSaveThem) {
  testing::TempDir work;
  testing::write_bytes(work / "model.json", kBatchNormModel);
  write_images(work / "train.csv", 96, 1);
  write_images(work / "test.csv", 32, 2);
  const std::vector<std::string> common = {"--model",         (work / "model.json").string(),
                                           "--train_data",    (work / "train.csv").string(),
                                           "--test_data",     (work / "test.csv").string(),
                                           "--threads",       "1",
                                           "--log_every",     "0",
                                           "--train_steps",   "30",
                                           "--learning_rate", "0.02"};
  const auto dir = [&](const char* name) { return (work / name).string(); };
  // Two towers on 16 examples: the slices the two workers of the clusters below get.
  DtrainProcess towers(concat({"train", "--strategy", "towers", "--towers", "2", "--batch_size",
                               "16", "--train_dir", dir("towers")},
                              common));
  DtrainProcess sync(concat({"train", "--strategy", "sync", "--ps", "1", "--workers", "2",
                             "--batch_size", "8", "--train_dir", dir("sync")},
                            common));
  const ProcessResult allreduce =
      run_dtrain(concat({"train", "--strategy", "allreduce", "--workers", "2", "--batch_size", "8",
                         "--train_dir", dir("allreduce")},
                        common));
  ASSERT_EQ(allreduce.exit_code, 0) << all_output(allreduce);
  const ProcessResult towers_run = towers.wait();
  ASSERT_EQ(towers_run.exit_code, 0) << all_output(towers_run);
  const ProcessResult sync_run = sync.wait();
  ASSERT_EQ(sync_run.exit_code, 0) << all_output(sync_run);

  // Both all-reduce workers hold the same parameters, moving statistics included.
  std::set<std::string> crcs;
  for (const testing::Match& line :
       testing::all_matches(allreduce.out, R"(worker=[0-9]+: parameters crc32c = (0x[0-9A-F]{8}))"))
    crcs.insert(line[1]);
  EXPECT_EQ(testing::all_matches(allreduce.out, "parameters crc32c").size(), 2u) << allreduce.out;
  EXPECT_EQ(crcs.size(), 1u) << allreduce.out;

  const Checkpoint reference = newest_checkpoint(dir("towers"));
  for (const std::string& name : kStatistics) {
    const CheckpointTensor* saved = reference.find(name);
    ASSERT_NE(saved, nullptr) << name;
    // Moved from the start (mean 0, variance 1) by the batches' statistics.
    const float start = name.ends_with("variance") ? 1.0f : 0.0f;
    float moved = 0;
    for (const float v : saved->values) moved = std::max(moved, std::abs(v - start));
    EXPECT_GT(moved, 0.05f) << name;
    // The same slices, averaged the same way, in another order of float additions.
    EXPECT_LE(testing::max_abs_difference(newest_checkpoint(dir("allreduce")), reference, name),
              1e-4f)
        << name;
    EXPECT_LE(testing::max_abs_difference(newest_checkpoint(dir("sync")), reference, name), 1e-4f)
        << name;
  }
  // The binary head learns this much in 30 steps (0.8125 measured), evaluated with the moving
  // statistics; a run whose statistics stay near their start scores about 0.6.
  for (const ProcessResult* run : {&towers_run, &sync_run, &allreduce}) {
    const auto accuracy = testing::first_match(run->out, R"(test accuracy = ([0-9.]+))");
    ASSERT_TRUE(accuracy) << run->out;
    std::cout << "test accuracy " << (*accuracy)[1] << "\n";
    EXPECT_GT(std::stod((*accuracy)[1]), 0.75) << run->out;
  }

  const std::string predicted = (work / "predicted.csv").string();
  const ProcessResult predict = run_dtrain({"predict", "--checkpoint", dir("sync"), "--input",
                                            (work / "test.csv").string(), "--output", predicted});
  ASSERT_EQ(predict.exit_code, 0) << all_output(predict);
  EXPECT_THAT(testing::read_bytes(predicted),
              ::testing::StartsWith("index,label,class,probability\n"));
}

}  // namespace
}  // namespace dtrain
