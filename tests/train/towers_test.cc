// K towers on a batch of B must train exactly like one tower on B, up to float reassociation.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "base/error.h"
#include "data/batcher.h"
#include "nn/init.h"
#include "nn/model_spec.h"
#include "nn/model_zoo.h"
#include "optim/optimizer.h"
#include "train/gradient_computer.h"

namespace dtrain {
namespace {

// A synthetic MNIST-shaped data set: training on it exercises every layer without files.
Dataset random_dataset(int64_t n, uint64_t seed) {
  Dataset d;
  d.size = n;
  d.example_size = 784;
  d.images.resize(static_cast<size_t>(n) * 784);
  d.labels.resize(n);
  std::mt19937_64 rng(seed);
  for (float& x : d.images) x = static_cast<float>(rng() % 256) / 255.0f;
  for (int32_t& y : d.labels) y = static_cast<int32_t>(rng() % 10);
  return d;
}

// Parameters after `steps` SGD steps of the given model, computed with `towers` towers of
// `team_size` threads each. The one-tower, one-thread reference applies the update after
// compute(); every other layout applies it inside compute(), chunk by chunk, as the trainer does.
ParamSet train(const std::string& model_name, int towers, int steps, const Dataset& data,
               int team_size = 1) {
  std::unique_ptr<Model> model =
      make_model({.name = model_name, .hidden_units = 100, .l2 = std::nullopt});
  ParamSet params(model->param_specs());
  GradSet grads(model->param_specs());
  initialize_params(params, 3);
  auto sgd = make_optimizer({.name = "sgd"}, model->param_specs());
  GradientComputer computer(*model, towers, 100, team_size);
  Batcher batcher(data, 100, 5);
  const bool reference = towers == 1 && team_size == 1;
  int step = 0;
  const GradientComputer::ChunkUpdate update = [&](size_t begin, size_t end) {
    sgd->apply(params, grads, 0.1f, step, begin, end);
  };
  for (; step < steps; ++step) {
    computer.compute(params, batcher.next(), grads, nullptr, reference ? nullptr : &update);
    if (reference) sgd->apply(params, grads, 0.1f, step);
  }
  return params;
}

double max_abs_difference(const ParamSet& a, const ParamSet& b) {
  double worst = 0;
  for (size_t i = 0; i < a.flat().size(); ++i) {
    worst = std::max(worst, std::abs(double(a.flat()[i]) - double(b.flat()[i])));
  }
  return worst;
}

double max_abs_value(const ParamSet& a) {
  double worst = 0;
  for (float v : a.flat()) worst = std::max(worst, std::abs(double(v)));
  return worst;
}

class TowersTest : public ::testing::TestWithParam<int> {};

TEST_P(TowersTest, KTowersOnBatchBEqualOneTowerOnBatchBAfter50Steps) {
  const Dataset data = random_dataset(1000, 11);
  const ParamSet one = train("mnist_inference", 1, 50, data);
  const ParamSet many = train("mnist_inference", GetParam(), 50, data);
  // Tolerance: towers sum the same per-example gradients in a different order (per-slice GEMMs,
  // then a weighted sum), so each step differs by float rounding, ~1e-7 relative per value; 50
  // steps of lr 0.1 on values of magnitude ~0.2 keep the drift small, though a ReLU that flips
  // on the random labels grows it: 1.1e-4 with 3 towers on oneDNN's AVX-512 kernels (an Intel
  // Xeon), under 1e-4 with its AVX2 kernels on the same machine. 1e-3 absolute still fails for
  // any real error: dropping one tower's slice moves values by ~1e-2.
  EXPECT_LT(max_abs_difference(one, many), 1e-3);
  EXPECT_GT(max_abs_value(one), 0.1);  // the comparison is between trained, non-trivial values
}

INSTANTIATE_TEST_SUITE_P(TowerCounts, TowersTest, ::testing::Values(2, 3, 4));

// Each tower weighs its slice's examples by their own weights: the towers' sum is one tower's
// weighted mean over the whole batch. Examples weighted 0 are as good as absent, so a second
// check: weights that zero half the data train differently from none.
TEST(TowersTest, WeightedExamplesGiveOneTowersParametersOnAnyNumberOfTowers) {
  Dataset data = random_dataset(1000, 11);
  for (int64_t i = 0; i < data.size; ++i)
    data.weights.push_back(static_cast<float>(i % 4) * 0.5f);  // 0, 0.5, 1, 1.5
  const ParamSet one = train("mnist_inference", 1, 30, data);
  for (const int towers : {2, 3}) {
    EXPECT_LT(max_abs_difference(one, train("mnist_inference", towers, 30, data)), 1e-4) << towers;
  }
  data.weights.clear();
  EXPECT_GT(max_abs_difference(one, train("mnist_inference", 1, 30, data)), 1e-3);
}

TEST(TowersTest, ThreadTeamsGiveTheParametersOfOneThreadAfter50Steps) {
  // --threads splits each product by columns (each element the same dot product) and the update
  // by ranges of the arena; the tolerance argument of the towers test applies unchanged.
  const Dataset data = random_dataset(1000, 11);
  const ParamSet one = train("mnist_inference", 1, 50, data);
  EXPECT_LT(max_abs_difference(one, train("mnist_inference", 1, 50, data, 2)), 1e-4);
  EXPECT_LT(max_abs_difference(one, train("mnist_inference", 2, 50, data, 2)), 1e-4);
}

TEST(TowersTest, TrainingActuallyMovesTheParameters) {
  // Guards the equivalence test against comparing two untrained models.
  const Dataset data = random_dataset(1000, 11);
  const ParamSet zero_steps = train("mnist_inference", 1, 0, data);
  const ParamSet fifty = train("mnist_inference", 2, 50, data);
  EXPECT_GT(max_abs_difference(zero_steps, fifty), 1e-3);
}

// BatchNormalization's moving statistics under towers: each tower normalises by its own slice, and
// the one copy moves by the average of the towers' deltas, as two runs on the slices give them.
TEST(TowersTest, MovingStatisticsMoveByTheAverageOfEachTowersBatchStatistics) {
  ModelSpec spec{.name = "bn",
                 .input_shape = {6},
                 .layers = {LayerSpec{.kind = LayerKind::kDense, .name = "d", .units = 4},
                            LayerSpec{.kind = LayerKind::kBatchNormalization, .name = "bn"},
                            LayerSpec{.kind = LayerKind::kDense, .name = "out", .units = 3}}};
  const std::unique_ptr<Model> model = build_model(spec);
  ParamSet params(model->param_specs());
  initialize_params(params, 3);
  Dataset data;
  data.size = 8;
  data.example_size = 6;
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (int i = 0; i < 48; ++i) data.images.push_back(uniform(rng));
  data.labels = {0, 1, 2, 0, 1, 2, 0, 1};

  auto grads_of = [&](int towers, int64_t first, int n) {
    GradientComputer computer(*model, towers, n);
    GradSet grads(model->param_specs());
    computer.compute(params, {data.images.data() + first * 6, data.labels.data() + first, n},
                     grads);
    return grads;
  };
  const GradSet both = grads_of(2, 0, 8), first = grads_of(1, 0, 4), second = grads_of(1, 4, 4);
  const GradSet whole = grads_of(1, 0, 8);
  double variance_gap = 0;
  for (const char* name : {"bn/moving_mean", "bn/moving_variance"}) {
    const size_t t = params.index(name);
    for (size_t k = 0; k < 4; ++k) {
      const float average = (first.values(t)[k] + second.values(t)[k]) / 2;
      EXPECT_NEAR(both.values(t)[k], average, 1e-6) << name << "[" << k << "]";
      EXPECT_NE(both.values(t)[k], 0.0f) << name << "[" << k << "]";
      if (name[10] == 'v') variance_gap += std::abs(both.values(t)[k] - whole.values(t)[k]);
    }
  }
  // One tower on the whole batch sees the variance between the slices too: another statistic.
  EXPECT_GT(variance_gap, 1e-4);
}

TEST(TowersTest, MoreTowersThanExamplesIsAUsageError) {
  std::unique_ptr<Model> model =
      make_model({.name = "softmax", .hidden_units = 100, .l2 = std::nullopt});
  EXPECT_THROW(GradientComputer(*model, 8, 4), UsageError);
  EXPECT_THROW(GradientComputer(*model, 0, 4), UsageError);
}

}  // namespace
}  // namespace dtrain
