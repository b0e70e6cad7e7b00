// BatchNormalization under every strategy and every optimizer, against local training on the
// combined batch. Each replica (tower, worker) normalises by its own slice, as Keras does, so what
// holds exactly is the rule of the moving statistics: every step moves them by the average of the
// replicas' batch statistics, at no learning rate, whatever the optimizer. The model normalises
// its raw input first, so the test computes what that layer's statistics must be from the data
// and from each run's record of the examples it trained on, in double, independently of dtrain.
// The replica strategies (all-reduce over a ring and by halving-doubling, elastic, sync ps) must
// equal towers over the same slices up to float reassociation; with one worker, every cluster
// strategy must equal local training so; and towers, whose slices normalise apart, must stay near
// local training on the whole batch. Async with two workers has no such rule (each push applies
// a delta computed from the values its worker pulled), so async runs one worker here.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "optim/optimizer.h"
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
using ::testing::Not;
using testing::ProcessResult;

constexpr int kMatrixExamples = 384;
constexpr int kMatrixFeatures = 16;
// Feature 0 is id / 512: exact in float, so a run's record of its examples names their rows.
constexpr int kMatrixIdScale = 512;
constexpr int kMatrixBatch = 32;  // per worker
constexpr int kMatrixSteps = 12;
constexpr double kMatrixInputMomentum = 0.5;  // bn_in's, in kMatrixModel

// The raw input normalised first (its statistics are the data's), then a convolution whose
// BatchNormalization follows the weights. Momenta well below Keras' 0.99 move the statistics far
// from their start in a few steps. The convolution has no bias, as Keras advises before a
// BatchNormalization: that bias's gradient is nothing but rounding noise, which Adam's m/sqrt(v)
// turns into steps of the learning rate, another for each order of the additions.
constexpr const char* kMatrixModel = R"({"class_name": "Sequential", "config": {"name": "bn_matrix",
 "layers": [
  {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 16], "name": "in"}},
  {"class_name": "BatchNormalization", "config": {"name": "bn_in", "momentum": 0.5}},
  {"class_name": "Reshape", "config": {"name": "image", "target_shape": [4, 4, 1]}},
  {"class_name": "Conv2D", "config": {"name": "conv", "filters": 2, "kernel_size": [3, 3],
   "padding": "same", "use_bias": false}},
  {"class_name": "BatchNormalization", "config": {"name": "bn_conv", "axis": [3],
   "momentum": 0.7}},
  {"class_name": "Activation", "config": {"name": "relu", "activation": "relu"}},
  {"class_name": "Flatten", "config": {"name": "flat"}},
  {"class_name": "Dense", "config": {"name": "out", "units": 3, "activation": "softmax"}}]}})";

// Synthetic rows drawn from a fixed seed: feature 0 the row's id, the rest uniform with a mean and
// spread of their own each (so every channel's statistics differ), the label the third of the
// features whose sum is largest.
std::vector<std::vector<float>> matrix_rows(int rows, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<float>> out;
  for (int r = 0; r < rows; ++r) {
    std::vector<float> row = {static_cast<float>(r) / kMatrixIdScale};
    for (int f = 1; f < kMatrixFeatures; ++f) {
      std::uniform_real_distribution<float> draw(0.1f * static_cast<float>(f % 5),
                                                 0.3f + 0.2f * static_cast<float>(f % 3));
      row.push_back(draw(rng));
    }
    out.push_back(std::move(row));
  }
  return out;
}

int matrix_label(const std::vector<float>& row) {
  float sums[3] = {0, 0, 0};
  for (int f = 1; f < kMatrixFeatures; ++f) sums[(f - 1) / 5] += row[static_cast<size_t>(f)];
  return static_cast<int>(std::max_element(sums, sums + 3) - sums);
}

void write_matrix_csv(const std::filesystem::path& path,
                      const std::vector<std::vector<float>>& rows) {
  std::string text;
  for (const std::vector<float>& row : rows) {
    for (const float v : row) text += fmt::format("{},", v);
    text += fmt::format("{}\n", matrix_label(row));
  }
  testing::write_bytes(path, text);
}

// What one step trained on: each replica's slice of the step's batch, as ids.
using MatrixStepSlices = std::vector<std::vector<int>>;

// --record_examples: "STEP EPOCH FEATURE0..." a line per step, the ids of one process's batch.
std::map<int64_t, std::vector<std::vector<int>>> read_matrix_record(
    const std::filesystem::path& path) {
  std::map<int64_t, std::vector<std::vector<int>>> batches;
  std::istringstream in(testing::read_bytes(path));
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    int64_t step = 0, epoch = 0;
    fields >> step >> epoch;
    std::vector<int> ids;
    for (double feature; fields >> feature;)
      ids.push_back(static_cast<int>(std::lround(feature * kMatrixIdScale)));
    batches[step].push_back(std::move(ids));
  }
  return batches;
}

// Every process's record of a run (one file, or one per worker beside it), each step's batches
// cut into `towers` slices as the towers cut them.
std::vector<MatrixStepSlices> matrix_slices_of_run(const std::filesystem::path& record,
                                                   int towers) {
  std::map<int64_t, MatrixStepSlices> steps;
  for (const auto& entry : std::filesystem::directory_iterator(record.parent_path())) {
    const std::string name = entry.path().filename().string();
    if (name != record.filename().string() && !name.starts_with(record.filename().string() + "."))
      continue;
    for (const auto& [step, batches] : read_matrix_record(entry.path())) {
      for (const std::vector<int>& batch : batches) {
        const int n = static_cast<int>(batch.size());
        for (int k = 0; k < towers; ++k) {
          steps[step].emplace_back(batch.begin() + n * k / towers,
                                   batch.begin() + n * (k + 1) / towers);
        }
      }
    }
  }
  std::vector<MatrixStepSlices> ordered;
  for (auto& [step, slices] : steps) ordered.push_back(std::move(slices));
  return ordered;
}

struct MatrixStatistics {
  std::vector<double> mean, variance;
};

// Keras' rule from the start (mean 0, variance 1): each step, moving = momentum·moving + (1 -
// momentum)·statistic, the statistic being the slices' batch means and biased variances averaged,
// each slice weighed by its share of the step's examples.
MatrixStatistics matrix_expected_statistics(const std::vector<std::vector<float>>& rows,
                                            const std::vector<MatrixStepSlices>& steps) {
  MatrixStatistics moving{std::vector<double>(kMatrixFeatures, 0.0),
                          std::vector<double>(kMatrixFeatures, 1.0)};
  for (const MatrixStepSlices& slices : steps) {
    size_t examples = 0;
    for (const auto& slice : slices) examples += slice.size();
    for (int c = 0; c < kMatrixFeatures; ++c) {
      double mean = 0, variance = 0;
      for (const auto& slice : slices) {
        double m = 0, v = 0;
        for (const int id : slice) m += rows[static_cast<size_t>(id)][static_cast<size_t>(c)];
        m /= static_cast<double>(slice.size());
        for (const int id : slice) {
          const double d = rows[static_cast<size_t>(id)][static_cast<size_t>(c)] - m;
          v += d * d;
        }
        v /= static_cast<double>(slice.size());
        const double weight = static_cast<double>(slice.size()) / static_cast<double>(examples);
        mean += weight * m;
        variance += weight * v;
      }
      moving.mean[c] = kMatrixInputMomentum * moving.mean[c] + (1 - kMatrixInputMomentum) * mean;
      moving.variance[c] =
          kMatrixInputMomentum * moving.variance[c] + (1 - kMatrixInputMomentum) * variance;
    }
  }
  return moving;
}

double matrix_max_difference(const CheckpointTensor& saved, const std::vector<double>& expected) {
  double most = 0;
  for (size_t i = 0; i < expected.size(); ++i)
    most = std::max(most, std::abs(static_cast<double>(saved.values[i]) - expected[i]));
  return most;
}

const std::vector<std::string> kMatrixTrainable = {"bn_in/gamma",   "bn_in/beta",   "conv/kernel",
                                                   "bn_conv/gamma", "bn_conv/beta", "out/kernel",
                                                   "out/bias"};

// One run of the matrix: its command line (after the recipe's and the common flags) and how many
// replicas share each step.
struct MatrixRun {
  std::string name;
  std::vector<std::string> flags;
  int replicas;  // towers or workers whose slices make a step
  int towers;    // slices a process's recorded batch is cut into
};

const std::vector<MatrixRun>& matrix_runs() {
  const auto batch = [](int n) { return std::to_string(n); };
  static const std::vector<MatrixRun> runs = {
      {"local_2", {"--strategy", "local", "--batch_size", batch(2 * kMatrixBatch)}, 1, 1},
      {"towers_2",
       {"--strategy", "towers", "--towers", "2", "--batch_size", batch(2 * kMatrixBatch)},
       2,
       2},
      {"allreduce_2",
       {"--strategy", "allreduce", "--workers", "2", "--batch_size", batch(kMatrixBatch)},
       2,
       1},
      // Buckets of 64 bytes: the statistics are cut across buckets, and share them with gamma.
      {"allreduce_2_buckets",
       {"--strategy", "allreduce", "--workers", "2", "--batch_size", batch(kMatrixBatch),
        "--fusion_bytes", "64"},
       2,
       1},
      // With a moving average of the weights, which evaluation reads: the statistics in it are
      // the ones training keeps, not an average of them.
      {"allreduce_2_average",
       {"--strategy", "allreduce", "--workers", "2", "--batch_size", batch(kMatrixBatch),
        "--moving_average_decay", "0.9"},
       2,
       1},
      {"elastic_2",
       {"--strategy", "allreduce", "--workers", "2", "--min_workers", "1", "--batch_size",
        batch(kMatrixBatch)},
       2,
       1},
      {"sync_2",
       {"--strategy", "sync", "--ps", "1", "--workers", "2", "--batch_size", batch(kMatrixBatch)},
       2,
       1},
      {"local_4", {"--strategy", "local", "--batch_size", batch(4 * kMatrixBatch)}, 1, 1},
      {"towers_4",
       {"--strategy", "towers", "--towers", "4", "--batch_size", batch(4 * kMatrixBatch)},
       4,
       4},
      // Four workers and a small arena: halving-doubling, not the ring.
      {"allreduce_4",
       {"--strategy", "allreduce", "--workers", "4", "--batch_size", batch(kMatrixBatch)},
       4,
       1},
      {"local_1", {"--strategy", "local", "--batch_size", batch(kMatrixBatch)}, 1, 1},
      {"allreduce_1",
       {"--strategy", "allreduce", "--workers", "1", "--batch_size", batch(kMatrixBatch)},
       1,
       1},
      {"sync_1",
       {"--strategy", "sync", "--ps", "1", "--workers", "1", "--batch_size", batch(kMatrixBatch)},
       1,
       1},
      {"async_1",
       {"--strategy", "async", "--ps", "1", "--workers", "1", "--batch_size", batch(kMatrixBatch)},
       1,
       1},
  };
  return runs;
}

// An optimizer (every one the code registers) and any flags that go with it: a recipe to add,
// such as gradient clipping, is a row here, and must leave the statistics' rule as it is.
struct MatrixRecipe {
  std::string optimizer;
  std::vector<std::string> flags;
};

std::vector<MatrixRecipe> matrix_recipes() {
  std::vector<MatrixRecipe> all;
  for (const std::string& name : optimizer_names()) all.push_back({name, {}});
  // Clipping acts on the aggregated gradient under every strategy, on trainable weights only;
  // the bounds are below this model's gradients, so each one clips.
  all.push_back({"adam", {"--clipnorm", "0.05"}});
  all.push_back({"sgd", {"--clipvalue", "0.01", "--momentum", "0.9", "--nesterov"}});
  all.push_back({"rmsprop", {"--momentum", "0.5", "--centered", "--weight_decay", "0.1"}});
  return all;
}

class BatchNormStrategies : public ::testing::TestWithParam<MatrixRecipe> {};

TEST_P(BatchNormStrategies, EveryStrategyMovesTheStatisticsByTheReplicasAverageAsLocalTraining) {
  const MatrixRecipe& recipe = GetParam();
  testing::TempDir work;
  const std::vector<std::vector<float>> rows = matrix_rows(kMatrixExamples, 1);
  write_matrix_csv(work / "train.csv", rows);
  write_matrix_csv(work / "test.csv", matrix_rows(24, 2));
  testing::write_bytes(work / "model.json", kMatrixModel);
  const std::vector<std::string> data = {"--model",      (work / "model.json").string(),
                                         "--train_data", (work / "train.csv").string(),
                                         "--test_data",  (work / "test.csv").string(),
                                         "--threads",    "1",
                                         "--log_every",  "0",
                                         "--seed",       "3"};
  const std::vector<std::string> common =
      concat(concat(data, {"--optimizer", recipe.optimizer, "--learning_rate", "0.02",
                           "--train_steps", std::to_string(kMatrixSteps)}),
             recipe.flags);
  // The starting weights, for the scale of what training moved: one step at a learning rate too
  // small to change a float of them (the moving statistics move; they are not compared).
  DtrainProcess start(
      concat(concat({"train"}, data), {"--learning_rate", "1e-30", "--train_steps", "1",
                                       "--train_dir", (work / "start").string()}));

  // Every run at once: each is a few processes of one thread on a tiny model.
  std::map<std::string, std::unique_ptr<DtrainProcess>> started;
  for (const MatrixRun& run : matrix_runs()) {
    std::filesystem::create_directories(work / run.name);
    started[run.name] = std::make_unique<DtrainProcess>(
        concat(concat({"train"}, run.flags),
               concat(common, {"--train_dir", (work / run.name / "train").string(),
                               "--record_examples", (work / run.name / "examples").string()})));
  }
  std::map<std::string, Checkpoint> trained;
  for (const MatrixRun& run : matrix_runs()) {
    const ProcessResult result = started[run.name]->wait();
    ASSERT_EQ(result.exit_code, 0) << run.name << "\n" << all_output(result);
    trained[run.name] = newest_checkpoint(work / run.name / "train");
    EXPECT_EQ(trained[run.name].global_step, kMatrixSteps) << run.name;
    // Momenta of 0.5 and 0.7 forget the start within these steps: nothing to warn of.
    EXPECT_THAT(all_output(result), Not(HasSubstr("moving_variance: after"))) << run.name;
    // All-reduce replicas end bit for bit alike, moving statistics included.
    const auto crcs = testing::all_matches(result.out, R"(parameters crc32c = (0x[0-9A-F]{8}))");
    std::set<std::string> distinct;
    for (const testing::Match& crc : crcs) distinct.insert(crc[1]);
    EXPECT_LE(distinct.size(), 1u) << run.name << "\n" << result.out;
  }

  // The rule, from the data: bn_in's statistics are those of the slices each run trained on.
  for (const MatrixRun& run : matrix_runs()) {
    const std::vector<MatrixStepSlices> steps =
        matrix_slices_of_run(work / run.name / "examples", run.towers);
    ASSERT_EQ(steps.size(), static_cast<size_t>(kMatrixSteps)) << run.name;
    for (const MatrixStepSlices& slices : steps)
      ASSERT_EQ(slices.size(), size_t(run.replicas)) << run.name;
    const MatrixStatistics expected = matrix_expected_statistics(rows, steps);
    const CheckpointTensor* mean = trained[run.name].find("bn_in/moving_mean");
    const CheckpointTensor* variance = trained[run.name].find("bn_in/moving_variance");
    ASSERT_NE(mean, nullptr) << run.name;
    ASSERT_NE(variance, nullptr) << run.name;
    EXPECT_LE(matrix_max_difference(*mean, expected.mean), 2e-6) << run.name;
    EXPECT_LE(matrix_max_difference(*variance, expected.variance), 2e-6) << run.name;
    // Moved well away from the start (mean 0, variance 1), so the bound above means something.
    EXPECT_GT(expected.mean[1], 0.05) << run.name;
    EXPECT_LT(expected.variance[1], 0.5) << run.name;
  }

  // Replicas over the same slices as towers: the same sums in another order. Every tensor:
  // trainable, statistics and the optimizer's slots.
  const auto expect_same = [&](const std::string& run, const std::string& reference,
                               float tolerance) {
    const Checkpoint& a = trained[run];
    const Checkpoint& b = trained[reference];
    ASSERT_EQ(a.tensors.size(), b.tensors.size()) << run;
    for (const CheckpointTensor& tensor : b.tensors) {
      EXPECT_LE(testing::max_abs_difference(a, b, tensor.name), tolerance)
          << run << " against " << reference << ": " << tensor.name;
    }
  };
  for (const char* run : {"allreduce_2", "allreduce_2_buckets", "elastic_2", "sync_2"})
    expect_same(run, "towers_2", 2e-5f);
  expect_same("allreduce_4", "towers_4", 2e-5f);
  for (const std::string name : {"bn_in/moving_mean", "bn_in/moving_variance",
                                 "bn_conv/moving_mean", "bn_conv/moving_variance"}) {
    const Checkpoint& averaged = trained["allreduce_2_average"];
    const CheckpointTensor* kept = averaged.find(name);
    const CheckpointTensor* evaluated = averaged.find(name + "/ExponentialMovingAverage");
    ASSERT_NE(kept, nullptr) << name;
    ASSERT_NE(evaluated, nullptr) << name;
    EXPECT_EQ(evaluated->values, kept->values) << name;
    EXPECT_LE(testing::max_abs_difference(averaged, trained["towers_2"], name), 2e-5f) << name;
  }
  // One worker: every strategy is local training, up to the order of float additions.
  for (const char* run : {"allreduce_1", "sync_1", "async_1"}) expect_same(run, "local_1", 1e-6f);

  // Towers against local training on the whole batch: per-slice normalisation moves the
  // trainable weights a little, far less than training moved them.
  const ProcessResult started_from = start.wait();
  ASSERT_EQ(started_from.exit_code, 0) << all_output(started_from);
  const Checkpoint initial = newest_checkpoint(work / "start");
  // Over every trainable tensor: the distance between two runs, against how far local training
  // moved the weights from their start.
  const auto relative_distance = [&](const std::string& run, const std::string& local) {
    double apart = 0, moved = 0;
    for (const CheckpointTensor& tensor : trained[local].tensors) {
      const auto it = std::find(kMatrixTrainable.begin(), kMatrixTrainable.end(), tensor.name);
      if (it == kMatrixTrainable.end()) continue;
      const CheckpointTensor* other = trained[run].find(tensor.name);
      const CheckpointTensor* begun = initial.find(tensor.name);
      for (size_t i = 0; i < tensor.values.size(); ++i) {
        apart += std::pow(other->values[i] - tensor.values[i], 2.0);
        moved += std::pow(tensor.values[i] - begun->values[i], 2.0);
      }
    }
    return std::sqrt(apart / moved);
  };
  // Measured 0.04 (sgd) to 0.12 (adam), for two towers and for four.
  for (const auto& [towers, local] : {std::pair{"towers_2", "local_2"}, {"towers_4", "local_4"}}) {
    const double distance = relative_distance(towers, local);
    std::cout << towers << " against " << local << ": " << distance << " of the distance moved\n";
    EXPECT_LE(distance, 0.25) << towers << " against " << local;
  }
}

// Keras' momentum 0.99 over a dozen steps leaves the moving variances mostly their initial 1:
// the chief (and no other worker) says so after its test accuracy, and so does dtrain eval.
TEST(BatchNormStrategiesWarning, AShortRunEvaluatingOnItsStartingVarianceSaysSoAndSoDoesEval) {
  testing::TempDir work;
  write_matrix_csv(work / "train.csv", matrix_rows(kMatrixExamples, 1));
  std::string model = kMatrixModel;
  const std::string input_momentum = "\"momentum\": 0.5}";
  model.replace(model.find(input_momentum), input_momentum.size(), "\"momentum\": 0.99}");
  testing::write_bytes(work / "model.json", model);
  const std::vector<std::string> flags = {"train",
                                          "--strategy",
                                          "allreduce",
                                          "--workers",
                                          "2",
                                          "--model",
                                          (work / "model.json").string(),
                                          "--train_data",
                                          (work / "train.csv").string(),
                                          "--test_data",
                                          (work / "train.csv").string(),
                                          "--batch_size",
                                          "16",
                                          "--train_steps",
                                          "12",
                                          "--threads",
                                          "1",
                                          "--log_every",
                                          "0",
                                          "--train_dir",
                                          (work / "train").string()};
  const ProcessResult trained = testing::run_dtrain(flags);
  ASSERT_EQ(trained.exit_code, 0) << all_output(trained);
  const std::string warning =
      "bn_in/moving_variance: after 12 updates at momentum 0.99 it still holds 0.99^12 = 0.89 of "
      "its initial 1";
  EXPECT_EQ(testing::count_lines_containing(all_output(trained), warning), 1)
      << all_output(trained);
  EXPECT_THAT(all_output(trained), Not(HasSubstr("bn_conv/moving_variance: after")));
  const ProcessResult evaluated =
      testing::run_dtrain({"eval", "--checkpoint", (work / "train").string()});
  ASSERT_EQ(evaluated.exit_code, 0) << all_output(evaluated);
  EXPECT_THAT(all_output(evaluated), HasSubstr(warning));
}

INSTANTIATE_TEST_SUITE_P(EveryOptimizer, BatchNormStrategies, ::testing::ValuesIn(matrix_recipes()),
                         [](const ::testing::TestParamInfo<MatrixRecipe>& info) {
                           std::string name = info.param.optimizer;
                           for (const std::string& flag : info.param.flags) name += "_" + flag;
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

}  // namespace
}  // namespace dtrain
