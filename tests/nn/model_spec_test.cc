// The built-in models as Keras JSON specs: the same parameters (names, shapes, initialisers, L2)
// as the hand-built models they replace; their JSON rebuilds them; a .json path is a model too.
// And a whole built CNN against finite differences, with and without dropout.
#include "nn/model_spec.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

#include "base/error.h"
#include "nn/init.h"
#include "nn/keras_json.h"
#include "nn/model_zoo.h"
#include "plan/recorded_settings.h"
#include "train/gradient_computer.h"
#include "train/trainer.h"

namespace dtrain {
namespace {

struct Expected {
  std::string name;
  Shape shape;
  InitSpec init;
  float l2;
};

void expect_params(const Model& model, const std::vector<Expected>& expected) {
  const std::vector<ParamSpec>& specs = model.param_specs();
  ASSERT_EQ(specs.size(), expected.size()) << model.name();
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(specs[i].name, expected[i].name) << model.name() << " parameter " << i;
    EXPECT_EQ(specs[i].shape, expected[i].shape) << specs[i].name;
    EXPECT_EQ(specs[i].init, expected[i].init) << specs[i].name;
    EXPECT_EQ(specs[i].l2, expected[i].l2) << specs[i].name;  // bit for bit
  }
}

const InitSpec kZeros = InitSpec::zeros();
InitSpec tn(float stddev) { return InitSpec::truncated_normal(stddev); }

TEST(BuiltinModels, SoftmaxIsOneZeroInitialisedDenseNamedWAndB) {
  expect_params(*make_model({.name = "softmax"}),
                {{"w", {10, 784}, kZeros, 0}, {"b", {10}, kZeros, 0}});
}

TEST(BuiltinModels, MlpDrawsWithStddevOneOverSqrtFanInForAnyHiddenWidth) {
  for (int hidden : {100, 37}) {
    expect_params(*make_model({.name = "mlp", .hidden_units = hidden}),
                  {{"hid_w", {hidden, 784}, tn(1.0f / std::sqrt(784.0f)), 0},
                   {"hid_b", {hidden}, kZeros, 0},
                   {"sm_w", {10, hidden}, tn(1.0f / std::sqrt(static_cast<float>(hidden))), 0},
                   {"sm_b", {10}, kZeros, 0}});
  }
  EXPECT_THROW(make_model({.name = "mlp", .hidden_units = 0}), UsageError);
}

TEST(BuiltinModels, MnistInferenceCarriesTensorFlowL2OfOneEMinusFourOnItsWeights) {
  expect_params(*make_model({.name = "mnist_inference"}),
                {{"layer1/weights", {500, 784}, tn(0.1f), 1e-4f},
                 {"layer1/biases", {500}, kZeros, 0},
                 {"layer2/weights", {10, 500}, tn(0.1f), 1e-4f},
                 {"layer2/biases", {10}, kZeros, 0}});
}

TEST(BuiltinModels, LenetHasTheDeepMnistTutorialsVariables) {
  const std::unique_ptr<Model> model = make_model({.name = "lenet"});
  const InitSpec bias = InitSpec::constant(0.1f);
  expect_params(*model, {{"conv1_w", {5, 5, 1, 32}, tn(0.1f), 0},
                         {"conv1_b", {32}, bias, 0},
                         {"conv2_w", {5, 5, 32, 64}, tn(0.1f), 0},
                         {"conv2_b", {64}, bias, 0},
                         {"fc1_w", {1024, 3136}, tn(0.1f), 0},
                         {"fc1_b", {1024}, bias, 0},
                         {"fc2_w", {10, 1024}, tn(0.1f), 0},
                         {"fc2_b", {10}, bias, 0}});
  EXPECT_EQ(model->input_size(), 784);
  EXPECT_EQ(model->layers().size(), 10u);  // conv relu pool conv relu pool flatten fc relu fc
}

TEST(BuiltinModels, TheL2FlagSetsEveryWeightInTensorFlowsConvention) {
  for (const std::string& name : model_names()) {
    const std::unique_ptr<Model> model = make_model({.name = name, .l2 = 0.3f});
    for (const ParamSpec& spec : model->param_specs())
      EXPECT_EQ(spec.l2, spec.shape.size() > 1 ? 0.3f : 0.0f) << name << " " << spec.name;
  }
}

TEST(BuiltinModels, TheirKerasJsonRebuildsTheSameParameters) {
  for (const std::string& name : model_names()) {
    const ModelConfig config{.name = name, .hidden_units = 64, .l2 = 0.02f};
    const std::unique_ptr<Model> model = make_model(config);
    const std::unique_ptr<Model> rebuilt =
        make_model_from_json(nlohmann::json::parse(model_spec_json(config).dump()));
    ASSERT_EQ(rebuilt->param_specs().size(), model->param_specs().size()) << name;
    for (size_t i = 0; i < model->param_specs().size(); ++i) {
      const ParamSpec& a = model->param_specs()[i];
      const ParamSpec& b = rebuilt->param_specs()[i];
      EXPECT_EQ(a.name, b.name);
      EXPECT_EQ(a.shape, b.shape) << a.name;
      EXPECT_EQ(a.init, b.init) << a.name;
      EXPECT_EQ(a.l2, b.l2) << a.name;
    }
  }
}

TEST(ModelFile, ACheckpointsTrainingConfigCarriesTheSpecThatRebuildsTheModel) {
  TrainConfig config;
  config.model.name = std::string(DTRAIN_SOURCE_DIR) + "/tests/nn/fixtures/tfjs_cnn.json";
  const nlohmann::json recorded = recorded_settings(config);
  ASSERT_TRUE(recorded.contains("model_spec"));
  const std::unique_ptr<Model> rebuilt = make_model_from_json(recorded["model_spec"]);
  const std::unique_ptr<Model> model = make_model(config.model);
  ASSERT_EQ(rebuilt->param_specs().size(), model->param_specs().size());
  for (size_t i = 0; i < model->param_specs().size(); ++i) {
    EXPECT_EQ(rebuilt->param_specs()[i].name, model->param_specs()[i].name);
    EXPECT_EQ(rebuilt->param_specs()[i].shape, model->param_specs()[i].shape);
    EXPECT_EQ(rebuilt->param_specs()[i].init, model->param_specs()[i].init);
  }
}

TEST(BuiltinModels, AnUnknownNameListsTheModels) {
  try {
    make_model({.name = "resnet"});
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("softmax, mlp, mnist_inference, lenet"), std::string::npos)
        << e.what();
  }
}

TEST(ModelFile, AJsonPathIsReadAndItsErrorsNameTheFile) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / fmt::format("dtrain_model_spec_test_{}", ::getpid());
  std::filesystem::create_directories(dir);
  const std::string good = (dir / "cnn.json").string();
  std::filesystem::copy_file(std::string(DTRAIN_SOURCE_DIR) + "/tests/nn/fixtures/keras3_cnn.json",
                             good, std::filesystem::copy_options::overwrite_existing);
  EXPECT_EQ(make_model({.name = good})->num_classes(), 10);

  const std::string bad = (dir / "bad.json").string();
  std::ofstream(bad) << R"({"class_name": "Sequential", "config": {"layers": [
      {"class_name": "Dense", "config": {"units": 3, "batch_input_shape": [null, 4],
                                         "use_bias": "yes"}}]}})";
  try {
    make_model({.name = bad});
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              bad + ": layer 0 (Dense): use_bias \"yes\" is not true or false");
  }
  const std::string missing = (dir / "missing.json").string();
  try {
    make_model({.name = missing});
    FAIL();
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos);
  }
  std::filesystem::remove_all(dir);
}

// ---------------------------------------------------------------------------------------------
// A whole built model against finite differences of its loss.

// (6,6,2) → Conv2D 4 3x3/2 same tanh → AveragePooling2D 2x2 same → Dropout → Flatten →
// Dense 5 sigmoid, L2 → Dense 3 softmax. Smooth everywhere, so central differences are exact to
// O(eps²); the dropout mask depends only on the step seed, fixed here.
ModelSpec small_cnn(float dropout_rate) {
  return {.name = "small_cnn",
          .input_shape = {6, 6, 2},
          .layers = {{.kind = LayerKind::kConv2D,
                      .name = "conv",
                      .filters = 4,
                      .activation = ActivationKind::kTanh,
                      .kernel_size = {3, 3},
                      .strides = {2, 2},
                      .padding = Padding::kSame},
                     {.kind = LayerKind::kAveragePooling2D,
                      .name = "pool",
                      .pool_size = {2, 2},
                      .strides = {2, 2},
                      .padding = Padding::kSame},
                     {.kind = LayerKind::kDropout, .name = "drop", .rate = dropout_rate},
                     {.kind = LayerKind::kFlatten, .name = "flat"},
                     {.kind = LayerKind::kDense,
                      .name = "hidden",
                      .units = 5,
                      .activation = ActivationKind::kSigmoid,
                      .kernel_l2 = 0.05},
                     {.kind = LayerKind::kDense,
                      .name = "out",
                      .units = 3,
                      .activation = ActivationKind::kSoftmax}}};
}

class WholeModelGradient : public ::testing::TestWithParam<float> {};

TEST_P(WholeModelGradient, MatchesFiniteDifferencesOfTheLossWithL2) {
  const std::unique_ptr<Model> model = build_model(small_cnn(GetParam()));
  ParamSet params(model->param_specs());
  initialize_params(params, 3);
  for (size_t p = 0; p < params.count(); ++p)  // biases start at zero; move them off it
    for (float& v : params.values(p)) v += 0.05f;
  const int n = 4;
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> pixel(-1.0f, 1.0f);
  std::vector<float> images(static_cast<size_t>(n) * model->input_size());
  for (float& x : images) x = pixel(rng);
  const std::vector<int32_t> labels = {0, 2, 1, 2};

  Workspace workspace(*model, n);
  ModelRunner runner(*model, workspace);
  runner.set_step_randomness(42, 0);
  GradSet grads(model->param_specs());
  runner.compute_gradients(params, images.data(), labels.data(), n, grads);

  GradSet scratch(model->param_specs());
  auto loss = [&] {
    return static_cast<double>(
        runner.compute_gradients(params, images.data(), labels.data(), n, scratch));
  };
  // The loss is float32 (≈ 1e-7 of ≈ 1), so its difference quotient over 2e-2 is good to ≈ 1e-5;
  // the O(eps²) truncation of these smooth layers is of the same order.
  const float eps = 1e-2f;
  double worst = 0;
  for (size_t p = 0; p < params.count(); ++p) {
    std::span<float> values = params.values(p);
    for (size_t i = 0; i < values.size(); ++i) {
      const float saved = values[i];
      values[i] = saved + eps;
      const double plus = loss();
      values[i] = saved - eps;
      const double minus = loss();
      values[i] = saved;
      const double numeric = (plus - minus) / (2.0 * eps);
      const double error = std::fabs(numeric - grads.values(p)[i]);
      worst = std::max(worst, error);
      EXPECT_NEAR(grads.values(p)[i], numeric, 2e-4) << params.spec(p).name << "[" << i << "]";
    }
  }
  EXPECT_GT(worst, 0.0);
}

INSTANTIATE_TEST_SUITE_P(ModelSpec, WholeModelGradient, ::testing::Values(0.0f, 0.5f));

TEST(ModelSpec, EvaluationNeverDrops) {
  ModelSpec with = small_cnn(0.9f);
  ModelSpec without = small_cnn(0.0f);
  const std::unique_ptr<Model> a = build_model(with), b = build_model(without);
  ParamSet params(a->param_specs());
  initialize_params(params, 4);
  const int n = 16;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> pixel(-1.0f, 1.0f);
  std::vector<float> images(static_cast<size_t>(n) * a->input_size());
  for (float& x : images) x = pixel(rng);
  Workspace wa(*a, n), wb(*b, n);
  std::vector<int32_t> pa(n), pb(n);
  ModelRunner ra(*a, wa), rb(*b, wb);
  ra.set_step_randomness(1, 0);
  ra.predict(params, images.data(), n, pa.data());
  rb.predict(params, images.data(), n, pb.data());
  EXPECT_EQ(pa, pb);
}

TEST(ModelSpec, TowersDrawTheDropoutMaskOfOneTower) {
  const std::unique_ptr<Model> model = build_model(small_cnn(0.5f));
  ParamSet params(model->param_specs());
  initialize_params(params, 6);
  const int n = 8;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> pixel(-1.0f, 1.0f);
  std::vector<float> images(static_cast<size_t>(n) * model->input_size());
  for (float& x : images) x = pixel(rng);
  std::vector<int32_t> labels = {0, 1, 2, 0, 1, 2, 0, 1};
  const Batch batch{images.data(), labels.data(), n};
  GradSet one(model->param_specs()), two(model->param_specs()), other(model->param_specs());
  GradientComputer single(*model, 1, n), split(*model, 2, n);
  single.set_step_seed(77);
  split.set_step_seed(77);
  const float loss_one = single.compute(params, batch, one);
  const float loss_two = split.compute(params, batch, two);
  EXPECT_NEAR(loss_one, loss_two, 1e-5);
  for (size_t i = 0; i < one.flat().size(); ++i) ASSERT_NEAR(one.flat()[i], two.flat()[i], 1e-5);
  // Another step's seed drops other values.
  single.set_step_seed(78);
  EXPECT_NE(single.compute(params, batch, other), loss_one);
}

}  // namespace
}  // namespace dtrain
