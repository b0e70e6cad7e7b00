// Keras Sequential JSON: the Keras 2, Keras 3 and TensorFlow.js fixtures (tests/nn/fixtures/) read
// to the same model, build to the layer shapes and parameter counts Keras reports, and write back
// as Keras 3 JSON that reads to an equal spec; refused options name the layer and the option.
#include "nn/keras_json.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/json_depth.h"
#include "nn/keras_json_writer.h"
#include "nn/model_spec.h"

namespace dtrain {
namespace {

using nlohmann::json;

std::string fixture_text(const std::string& name) {
  std::ifstream in(std::string(DTRAIN_SOURCE_DIR) + "/tests/nn/fixtures/" + name, std::ios::binary);
  EXPECT_TRUE(in.good()) << name;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

json fixture(const std::string& name) { return json::parse(fixture_text(name)); }

std::vector<Shape> output_shapes(const Model& model) {
  std::vector<Shape> shapes;
  for (const auto& layer : model.layers()) shapes.push_back(layer->output_shape());
  return shapes;
}

int64_t parameter_count(const Model& model) {
  int64_t n = 0;
  for (const ParamSpec& spec : model.param_specs()) n += num_elements(spec.shape);
  return n;
}

class MlpFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(MlpFixture, BuildsTanhLayersAndDropoutWithKerasParameterCount) {
  const ModelSpec spec = read_keras_json(fixture_text(GetParam()), GetParam());
  EXPECT_EQ(spec.input_shape, (Shape{784}));
  ASSERT_EQ(spec.layers.size(), 5u);
  EXPECT_EQ(spec.layers[1].kind, LayerKind::kDropout);
  EXPECT_FLOAT_EQ(spec.layers[1].rate, 0.2f);
  EXPECT_EQ(spec.layers[2].activation, ActivationKind::kTanh);
  EXPECT_NEAR(spec.layers[2].kernel_l2, 0.001, 1e-9);
  EXPECT_EQ(spec.layers[4].activation, ActivationKind::kSoftmax);

  const std::unique_ptr<Model> model = build_model(spec);
  // Dense+tanh, Dropout, Dense+tanh, Dropout, Dense: the final softmax is the loss's.
  EXPECT_EQ(output_shapes(*model),
            (std::vector<Shape>{{128}, {128}, {128}, {64}, {64}, {64}, {10}}));
  EXPECT_EQ(model->layers()[1]->describe().rfind("tanh", 0), 0u);
  // Keras' summary: (784·128 + 128) + (128·64 + 64) + (64·10 + 10).
  EXPECT_EQ(parameter_count(*model), 100480 + 8256 + 650);
  const std::vector<ParamSpec>& params = model->param_specs();
  ASSERT_EQ(params.size(), 6u);
  EXPECT_EQ(params[0].name, spec.layers[0].name + "/kernel");
  EXPECT_EQ(params[1].name, spec.layers[0].name + "/bias");
  EXPECT_EQ(params[0].shape, (Shape{128, 784}));  // dtrain stores Dense weights (out, in)
  EXPECT_EQ(params[0].fan_in, 784);               // ... with Keras' fans
  EXPECT_EQ(params[0].fan_out, 128);
  EXPECT_EQ(params[0].l2, 0.0f);
  // Keras' L2(0.001) adds 0.001·Σw²: 0.002 in TensorFlow's l2·Σw²/2.
  EXPECT_FLOAT_EQ(params[2].l2, 0.002f);
  EXPECT_EQ(params[3].l2, 0.0f);
}

INSTANTIATE_TEST_SUITE_P(KerasJson, MlpFixture,
                         ::testing::Values("keras2_mlp.json", "keras3_mlp.json", "tfjs_mlp.json"));

TEST(KerasJson, DefaultKernelInitialisersAreGlorotUniformInKerasAndGlorotNormalInTfjs) {
  const ModelSpec keras2 = read_keras_json(fixture_text("keras2_mlp.json"), "keras2");
  const ModelSpec keras3 = read_keras_json(fixture_text("keras3_mlp.json"), "keras3");
  const ModelSpec tfjs = read_keras_json(fixture_text("tfjs_mlp.json"), "tfjs");
  EXPECT_EQ(keras2.layers[0].kernel_initializer, InitSpec::glorot_uniform());
  EXPECT_EQ(keras3.layers[0].kernel_initializer, InitSpec::glorot_uniform());
  EXPECT_EQ(tfjs.layers[0].kernel_initializer,
            InitSpec::variance_scaling(1.0f, FanMode::kFanAvg, Distribution::kTruncatedNormal));
  EXPECT_EQ(keras3.layers[0].bias_initializer, InitSpec::zeros());
}

class CnnFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(CnnFixture, BuildsSameAndValidConvolutionsAndBothPoolingsFromAReshapedInput) {
  const ModelSpec spec = read_keras_json(fixture_text(GetParam()), GetParam());
  EXPECT_EQ(spec.input_shape, (Shape{784}));
  ASSERT_EQ(spec.layers.size(), 8u);
  const std::unique_ptr<Model> model = build_model(spec);
  EXPECT_EQ(output_shapes(*model), (std::vector<Shape>{
                                       {28, 28, 1},   // Reshape 784 -> 28x28x1
                                       {28, 28, 8},   // Conv2D 3x3 same
                                       {14, 14, 8},   // MaxPooling2D 2x2 valid, before
                                       {14, 14, 8},   // the conv's relu (they commute)
                                       {12, 12, 16},  // Conv2D 3x3 valid
                                       {12, 12, 16},  // relu
                                       {6, 6, 16},    // AveragePooling2D 2x2 same
                                       {6, 6, 16},    // Dropout
                                       {576},         // Flatten
                                       {10},          // Dense (softmax dropped)
                                   }));
  // Keras' summary: (3·3·1·8 + 8) + (3·3·8·16 + 16) + (576·10 + 10).
  EXPECT_EQ(parameter_count(*model), 80 + 1168 + 5770);
  EXPECT_EQ(model->param_specs()[0].shape, (Shape{3, 3, 1, 8}));
  EXPECT_EQ(model->param_specs()[0].fan_in, 9);
  EXPECT_EQ(model->param_specs()[0].fan_out, 72);
  EXPECT_EQ(model->param_specs()[2].shape, (Shape{3, 3, 8, 16}));
  EXPECT_EQ(model->param_specs()[4].shape, (Shape{10, 576}));
}

INSTANTIATE_TEST_SUITE_P(KerasJson, CnnFixture,
                         ::testing::Values("keras2_cnn.json", "keras3_cnn.json", "tfjs_cnn.json"));

TEST(KerasJson, TheThreeDialectsOfOneModelReadToTheSameLayers) {
  ModelSpec keras2 = read_keras_json(fixture_text("keras2_cnn.json"), "keras2");
  ModelSpec keras3 = read_keras_json(fixture_text("keras3_cnn.json"), "keras3");
  EXPECT_EQ(keras2, keras3);
}

class RoundTrip : public ::testing::TestWithParam<const char*> {};

TEST_P(RoundTrip, KerasThreeJsonReadsBackToAnEqualSpec) {
  const ModelSpec spec = read_keras_json(fixture_text(GetParam()), GetParam());
  const nlohmann::ordered_json written = to_keras_json(spec);
  EXPECT_EQ(written["module"], "keras");
  EXPECT_EQ(written["config"]["layers"][0]["class_name"], "InputLayer");
  EXPECT_EQ(written["config"]["layers"][0]["config"]["batch_shape"], json::parse("[null, 784]"));
  EXPECT_EQ(read_keras_json(written.dump(2), "written"), spec);
}

INSTANTIATE_TEST_SUITE_P(KerasJson, RoundTrip,
                         ::testing::Values("keras2_mlp.json", "keras3_mlp.json", "tfjs_mlp.json",
                                           "keras2_cnn.json", "keras3_cnn.json", "tfjs_cnn.json"));

TEST(KerasJson, RoundTripKeepsEveryInitialiserStridesAndDtrainNames) {
  ModelSpec spec{.name = "all", .input_shape = {9, 8, 2}};
  const InitSpec inits[] = {
      InitSpec::variance_scaling(2.0f, FanMode::kFanOut, Distribution::kUntruncatedNormal),
      {.kind = InitKind::kRandomNormal, .mean = 0.5f, .stddev = 0.25f},
      {.kind = InitKind::kRandomUniform, .minval = -0.3f, .maxval = 0.7f},
      {.kind = InitKind::kTruncatedNormal, .mean = 0.1f, .stddev = 0.2f},
      {.kind = InitKind::kOnes},
      InitSpec::constant(0.3f),
  };
  LayerSpec conv{.kind = LayerKind::kConv2D,
                 .name = "c",
                 .filters = 3,
                 .activation = ActivationKind::kSigmoid,
                 .kernel_initializer = inits[0],
                 .bias_initializer = inits[1],
                 .kernel_l2 = 0.25,
                 .kernel_name = "conv_w",
                 .bias_name = "conv_b",
                 .kernel_size = {3, 2},
                 .strides = {2, 1},
                 .padding = Padding::kSame};
  LayerSpec pool{.kind = LayerKind::kAveragePooling2D,
                 .name = "p",
                 .pool_size = {3, 2},
                 .strides = {1, 2},
                 .padding = Padding::kValid};
  LayerSpec dense{.kind = LayerKind::kDense,
                  .name = "d",
                  .units = 4,
                  .use_bias = false,
                  .kernel_initializer = inits[2]};
  LayerSpec dense2{.kind = LayerKind::kDense,
                   .name = "e",
                   .units = 2,
                   .kernel_initializer = inits[3],
                   .bias_initializer = inits[4]};
  LayerSpec dense3{
      .kind = LayerKind::kDense, .name = "f", .units = 2, .bias_initializer = inits[5]};
  spec.layers = {conv,
                 pool,
                 {.kind = LayerKind::kReshape, .name = "r", .target_shape = {-1}},
                 dense,
                 {.kind = LayerKind::kActivation, .name = "a", .activation = ActivationKind::kTanh},
                 {.kind = LayerKind::kDropout, .name = "o", .rate = 0.1f},
                 dense2,
                 dense3};
  EXPECT_EQ(read_keras_json(to_keras_json(spec).dump(), "written"), spec);
  const std::unique_ptr<Model> model = build_model(spec);
  EXPECT_EQ(model->param_specs()[0].name, "conv_w");
  EXPECT_EQ(model->param_specs()[2].name, "d/kernel");  // no bias
  EXPECT_EQ(model->param_specs()[3].name, "e/kernel");
  EXPECT_EQ(model->layers().back()->output_shape(), (Shape{2}));
}

TEST(KerasJson, InputShapeMayComeFromTheFirstLayersBuildConfig) {
  json doc = fixture("keras3_mlp.json");
  doc["config"]["layers"].erase(0);  // no InputLayer
  EXPECT_EQ(read_keras_json(doc, "m").input_shape, (Shape{784}));
  doc["config"]["layers"][0].erase("build_config");
  try {
    read_keras_json(doc, "m.json");
    FAIL() << "a model without an input shape was accepted";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "m.json: layer 0 (Dense): the model's input shape is not given (no InputLayer, no "
              "batch_input_shape)");
  }
}

// A BatchNormalization layer as tf.keras 2 writes one after a Conv2D, with `changes` applied.
json batch_norm(const json& changes = json::object()) {
  json config = json::parse(R"({"name": "bn", "trainable": true, "dtype": "float32", "axis": [3],
    "momentum": 0.99, "epsilon": 0.001, "center": true, "scale": true,
    "beta_initializer": {"class_name": "Zeros", "config": {}},
    "gamma_initializer": {"class_name": "Ones", "config": {}},
    "moving_mean_initializer": {"class_name": "Zeros", "config": {}},
    "moving_variance_initializer": {"class_name": "Ones", "config": {}},
    "beta_regularizer": null, "gamma_regularizer": null, "beta_constraint": null,
    "gamma_constraint": null})");
  config.update(changes);
  return {{"class_name", "BatchNormalization"}, {"config", config}};
}

struct Refusal {
  const char* what;
  std::function<void(json& layers)> change;
  const char* message;
};

class RefusedOption : public ::testing::TestWithParam<Refusal> {};

TEST_P(RefusedOption, NamesTheSourceTheLayerItsClassAndTheOption) {
  json doc = fixture("keras2_cnn.json");
  GetParam().change(doc["config"]["layers"]);
  try {
    build_model(read_keras_json(doc, "model.json"), {}, "model.json");
    FAIL() << GetParam().what << " was accepted";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), GetParam().message);
  }
}

// Layers of keras2_cnn.json: 0 InputLayer, 1 Reshape, 2 Conv2D, 3 MaxPooling2D, 4 Conv2D,
// 5 AveragePooling2D, 6 Dropout, 7 Flatten, 8 Dense.
INSTANTIATE_TEST_SUITE_P(
    KerasJson, RefusedOption,
    ::testing::Values(
        Refusal{"dilation",
                [](json& l) {
                  l[4]["config"]["dilation_rate"] = {2, 2};
                },
                "model.json: layer 4 (Conv2D): dilation_rate [2, 2] is not supported (only 1)"},
        Refusal{"groups", [](json& l) { l[2]["config"]["groups"] = 2; },
                "model.json: layer 2 (Conv2D): groups 2 is not supported (only 1)"},
        Refusal{"causal padding", [](json& l) { l[2]["config"]["padding"] = "causal"; },
                "model.json: layer 2 (Conv2D): padding \"causal\" is not supported (only valid or "
                "same)"},
        Refusal{"channels_first", [](json& l) { l[3]["config"]["data_format"] = "channels_first"; },
                "model.json: layer 3 (MaxPooling2D): data_format \"channels_first\" is not "
                "supported (only channels_last)"},
        Refusal{"elu", [](json& l) { l[8]["config"]["activation"] = "elu"; },
                "model.json: layer 8 (Dense): activation \"elu\" is not supported (only linear, "
                "relu, tanh, sigmoid or softmax)"},
        Refusal{"bias L2",
                [](json& l) {
                  l[8]["config"]["bias_regularizer"] = {{"class_name", "L2"},
                                                        {"config", {{"l2", 0.01}}}};
                },
                "model.json: layer 8 (Dense): bias_regularizer {\"class_name\":\"L2\",\"config\":"
                "{\"l2\":0.01}} is not supported (only null)"},
        Refusal{"L1",
                [](json& l) {
                  l[8]["config"]["kernel_regularizer"] = {{"class_name", "L1"},
                                                          {"config", {{"l1", 0.01}}}};
                },
                "model.json: layer 8 (Dense): kernel_regularizer {\"class_name\":\"L1\",\"config\":"
                "{\"l1\":0.01}} is not supported (only null or L2)"},
        Refusal{"frozen", [](json& l) { l[8]["config"]["trainable"] = false; },
                "model.json: layer 8 (Dense): trainable false is not supported (only true)"},
        Refusal{"float16", [](json& l) { l[2]["config"]["dtype"] = "float16"; },
                "model.json: layer 2 (Conv2D): dtype \"float16\" is not supported (only float32)"},
        Refusal{"noise shape",
                [](json& l) {
                  l[6]["config"]["noise_shape"] = {nullptr, 1, 1, 16};
                },
                "model.json: layer 6 (Dropout): noise_shape [null, 1, 1, 16] is not supported "
                "(only null)"},
        Refusal{"orthogonal",
                [](json& l) {
                  l[4]["config"]["kernel_initializer"] = {{"class_name", "Orthogonal"},
                                                          {"config", {{"gain", 1.0}}}};
                },
                "model.json: layer 4 (Conv2D): kernel_initializer \"Orthogonal\" is not supported "
                "(only GlorotUniform, GlorotNormal, HeNormal, HeUniform, LecunNormal, "
                "LecunUniform, VarianceScaling, Zeros, Ones, Constant, RandomNormal, "
                "RandomUniform or TruncatedNormal)"},
        Refusal{"an initialiser beyond float32",
                [](json& l) {
                  l[4]["config"]["kernel_initializer"] = {{"class_name", "TruncatedNormal"},
                                                          {"config", {{"stddev", 1e56}}}};
                },
                "model.json: layer 4 (Conv2D): kernel_initializer stddev 1e+56 is beyond "
                "float32's range"},
        Refusal{"an L2 beyond float32",
                [](json& l) {
                  l[8]["config"]["kernel_regularizer"] = {{"class_name", "L2"},
                                                          {"config", {{"l2", 1e300}}}};
                },
                "model.json: layer 8 (Dense): kernel_regularizer {\"class_name\":\"L2\",\"config\":"
                "{\"l2\":1e+300}} is not supported (only null or L2)"},
        Refusal{"a layer class of its own",
                [](json& l) { l[7]["class_name"] = "LayerNormalization"; },
                "model.json: layer 7 (LayerNormalization): this layer class is not supported "
                "(only InputLayer, Dense, Conv2D, MaxPooling2D, AveragePooling2D, Flatten, "
                "Reshape, Dropout, Activation, BatchNormalization)"},
        Refusal{"batch renormalisation",
                [](json& l) {
                  l.insert(l.begin() + 3, batch_norm({{"renorm", true}}));
                },
                "model.json: layer 3 (BatchNormalization): renorm true is not supported (only "
                "false)"},
        Refusal{"ghost batches",
                [](json& l) {
                  l.insert(l.begin() + 3, batch_norm({{"virtual_batch_size", 4}}));
                },
                "model.json: layer 3 (BatchNormalization): virtual_batch_size 4 is not supported "
                "(only null)"},
        Refusal{"synchronised statistics",
                [](json& l) {
                  l.insert(l.begin() + 3, batch_norm({{"synchronized", true}}));
                },
                "model.json: layer 3 (BatchNormalization): synchronized true is not supported "
                "(only false: each worker normalises by its own batch, and the moving statistics "
                "are averaged over the workers)"},
        Refusal{"a gamma regulariser",
                [](json& l) {
                  l.insert(l.begin() + 3,
                           batch_norm({{"gamma_regularizer",
                                        {{"class_name", "L2"}, {"config", {{"l2", 0.1}}}}}}));
                },
                "model.json: layer 3 (BatchNormalization): gamma_regularizer {\"class_name\":"
                "\"L2\",\"config\":{\"l2\":0.1}} is not supported (only null)"},
        Refusal{"a momentum above one",
                [](json& l) {
                  l.insert(l.begin() + 3, batch_norm({{"momentum", 1.5}}));
                },
                "model.json: layer 3 (BatchNormalization): momentum 1.5 is not a number in [0, "
                "1]"},
        Refusal{"normalising the rows",
                [](json& l) {
                  l.insert(l.begin() + 3, batch_norm({{"axis", {1}}}));
                },
                "model.json: layer 2 (BatchNormalization 'bn'): axis 1 is not supported for input "
                "shape [28, 28, 8] (only the last axis, -1 or 3: the channels)"},
        Refusal{"a Dense on images", [](json& l) { l.erase(7); },
                "model.json: layer 6 (Dense 'dense'): input shape [6, 6, 16] is not supported "
                "(Dense takes a flat input; add a Flatten before it)"},
        Refusal{"softmax inside", [](json& l) { l[2]["config"]["activation"] = "softmax"; },
                "model.json: layer 1 (Conv2D 'conv2d'): softmax is only supported as the model's "
                "last activation (the loss applies it to the logits)"},
        Refusal{"wrong reshape",
                [](json& l) {
                  l[1]["config"]["target_shape"] = {28, 27, 1};
                },
                "model.json: layer 0 (Reshape 'reshape'): target_shape [28, 27, 1] does not hold "
                "the 784 values of input shape [784]"}),
    [](const ::testing::TestParamInfo<Refusal>& info) {
      std::string name;
      for (char c : std::string(info.param.what)) name += std::isalnum(c) ? c : '_';
      return name;
    });

TEST(KerasJson, DefaultOptionsAreAcceptedHoweverTheyAreSpelled) {
  json doc = fixture("keras2_cnn.json");
  json& conv = doc["config"]["layers"][2]["config"];
  conv["dilation_rate"] = 1;
  conv["data_format"] = nullptr;
  conv["kernel_size"] = 3;
  conv["strides"] = {{"class_name", "__tuple__"}, {"items", {1, 1}}};
  conv["dtype"] = {{"module", "keras"},
                   {"class_name", "DTypePolicy"},
                   {"config", {{"name", "float32"}}},
                   {"registered_name", nullptr}};
  conv["kernel_initializer"] = "he_normal";
  conv["lora_rank"] = nullptr;
  EXPECT_EQ(read_keras_json(doc, "m"), read_keras_json(fixture("keras2_cnn.json"), "m"));
}

TEST(KerasJson, BatchNormalizationOfKeras2And3ReadsToOneSpecWithKerasWeights) {
  json keras2 = fixture("keras2_cnn.json");
  keras2["config"]["layers"].insert(keras2["config"]["layers"].begin() + 3,
                                    batch_norm({{"momentum", 0.9}, {"fused", true}}));
  // Keras 3: the axis as -1, initialisers with their module, the synchronized flag.
  json keras3 = fixture("keras2_cnn.json");
  json layer = batch_norm({{"axis", -1},
                           {"momentum", 0.9},
                           {"synchronized", false},
                           {"gamma_initializer",
                            {{"module", "keras.initializers"},
                             {"class_name", "Ones"},
                             {"config", json::object()},
                             {"registered_name", nullptr}}}});
  keras3["config"]["layers"].insert(keras3["config"]["layers"].begin() + 3, layer);
  const ModelSpec spec = read_keras_json(keras2, "k2");
  ModelSpec other = read_keras_json(keras3, "k3");
  // The same axis, counted from the end.
  EXPECT_EQ(other.layers[2].axis, -1);
  EXPECT_EQ(spec.layers[2].axis, 3);
  other.layers[2].axis = 3;
  EXPECT_EQ(other.layers, spec.layers);
  EXPECT_EQ(build_model(other)->param_specs().size(), build_model(spec)->param_specs().size());
  const LayerSpec& bn = spec.layers[2];
  EXPECT_EQ(bn.kind, LayerKind::kBatchNormalization);
  EXPECT_FLOAT_EQ(bn.momentum, 0.9f);
  EXPECT_FLOAT_EQ(bn.epsilon, 1e-3f);

  const std::unique_ptr<Model> model = build_model(spec);
  std::vector<std::string> names;
  for (const ParamSpec& p : model->param_specs()) {
    if (p.name.starts_with("bn/")) {
      names.push_back(p.name);
      EXPECT_EQ(p.shape, (Shape{8}));
      EXPECT_EQ(p.trainable, !p.name.starts_with("bn/moving"));
    }
  }
  EXPECT_EQ(names, (std::vector<std::string>{"bn/gamma", "bn/beta", "bn/moving_mean",
                                             "bn/moving_variance"}));
  // Keras' count, non-trainable included: the fixture's and 4 vectors of 8.
  EXPECT_EQ(parameter_count(*model), 80 + 1168 + 5770 + 32);
  // Written as Keras 3 writes it, it reads back equal.
  EXPECT_EQ(read_keras_json(to_keras_json(spec).dump(), "again"), spec);
}

TEST(KerasJson, ADenseOfOneSigmoidUnitIsABinaryHeadWithBinaryCrossEntropy) {
  json doc = fixture("keras2_mlp.json");
  json& last = doc["config"]["layers"][5]["config"];
  last["units"] = 1;
  last["activation"] = "sigmoid";
  const ModelSpec spec = read_keras_json(doc, "m");
  const std::unique_ptr<Model> model = build_model(spec);
  EXPECT_EQ(model->loss(), Loss::kBinaryCrossEntropy);
  EXPECT_EQ(model->output_width(), 1);
  EXPECT_EQ(model->num_classes(), 2);
  // The loss applies the sigmoid: the model ends at the Dense's logit.
  EXPECT_EQ(model->layers().back()->describe().rfind("dense", 0), 0u)
      << model->layers().back()->describe();

  // The loss a file was compiled with must fit its head, and travels in the spec.
  doc["compile_config"] = {{"loss", "binary_crossentropy"}};
  ModelSpec compiled = read_keras_json(doc, "m");
  EXPECT_EQ(compiled.loss, "binary_crossentropy");
  EXPECT_EQ(read_keras_json(to_keras_json(compiled).dump(), "again"), compiled);
  EXPECT_EQ(build_model(compiled)->loss(), Loss::kBinaryCrossEntropy);
  compiled.loss = "sparse_categorical_crossentropy";
  EXPECT_THROW(build_model(compiled, {}, "m.json"), UsageError);

  json softmax = fixture("keras2_mlp.json");
  softmax["modelTopology"] = {{"model_config", softmax}};
  softmax["modelTopology"]["training_config"] = {{"loss", "binary_crossentropy"}};
  try {
    build_model(read_keras_json(softmax, "m.json"), {}, "m.json");
    FAIL() << "binary_crossentropy on a softmax head was accepted";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "m.json: loss binary_crossentropy needs a binary head: end the model in Dense(1, "
              "activation=\"sigmoid\")");
  }
  softmax["modelTopology"]["training_config"] = {{"loss", "mean_squared_error"}};
  EXPECT_THROW(build_model(read_keras_json(softmax, "m.json"), {}, "m.json"), UsageError);
  // Keras 3's loss objects are named as their functions.
  doc["compile_config"] = {
      {"loss", {{"module", "keras.losses"}, {"class_name", "BinaryCrossentropy"}, {"config", {}}}}};
  EXPECT_EQ(read_keras_json(doc, "m").loss, "binary_crossentropy");
}

TEST(KerasJson, ATrailingSoftmaxActivationLayerIsTheLoss) {
  json doc = fixture("keras2_mlp.json");
  doc["config"]["layers"][5]["config"]["activation"] = "linear";
  doc["config"]["layers"].push_back(
      {{"class_name", "Activation"}, {"config", {{"name", "act"}, {"activation", "softmax"}}}});
  const std::unique_ptr<Model> model = build_model(read_keras_json(doc, "m"));
  EXPECT_EQ(model->layers().size(), 7u);
  EXPECT_EQ(model->layers().back()->output_shape(), (Shape{10}));
}

TEST(KerasJson, AValueOfTheWrongJsonTypeIsAUsageErrorNamingTheSource) {
  json doc = fixture("keras2_mlp.json");
  doc["config"]["layers"][1]["config"]["kernel_initializer"] = {{"class_name", "VarianceScaling"},
                                                                {"config", {{"mode", 3}}}};
  try {
    read_keras_json(doc, "typed.json");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("typed.json: ", 0), 0u) << e.what();
  }
}

// The run plan checks them against its flags (tests/plan/recipes_test.cc); here they are carried.
TEST(KerasJson, TrainingDefaultsAtTheTopLevelAreReadAndWrittenBack) {
  json doc = fixture("keras3_mlp.json");
  doc["dtrain"] = json::parse(
      R"({"defaults": {"optimizer": "sgd", "learning_rate": 0.1, "lr_decay_rate": 0.97,
                       "moving_average_decay": 0.999, "epochs": 2.5}})");
  const ModelSpec spec = read_keras_json(doc, "defaults.json");
  EXPECT_EQ(spec.defaults, doc["dtrain"]["defaults"]);
  const json written = json::parse(to_keras_json(spec).dump());
  EXPECT_EQ(written["dtrain"]["defaults"]["learning_rate"], 0.1);
  EXPECT_EQ(read_keras_json(written, "written"), spec);
  // A file without them has none, and writes none.
  const ModelSpec plain = read_keras_json(fixture("keras3_mlp.json"), "plain.json");
  EXPECT_EQ(plain.defaults, json::object());
  EXPECT_FALSE(json::parse(to_keras_json(plain).dump()).contains("dtrain"));
}

TEST(KerasJson, TheLayerHiddenUnitsSizesIsReadAndWrittenBack) {
  json doc = fixture("keras3_mlp.json");
  const std::string first = doc["config"]["layers"][1]["config"]["name"];
  const std::string second = doc["config"]["layers"][3]["config"]["name"];  // [2]: a Dropout
  doc["dtrain"] = {{"hidden_units", {{"layer", first}, {"fan_in_stddev", second}}}};
  const ModelSpec spec = read_keras_json(doc, "sized.json");
  ASSERT_TRUE(spec.hidden_units);
  EXPECT_EQ(*spec.hidden_units, (HiddenUnitsLayer{.layer = first, .fan_in_stddev = second}));
  EXPECT_EQ(read_keras_json(json::parse(to_keras_json(spec).dump()), "written"), spec);
  // A layer that is not there, or not a Dense one, is refused naming the file and the key.
  doc["dtrain"]["hidden_units"]["fan_in_stddev"] = "nope";
  try {
    read_keras_json(doc, "sized.json");
    ADD_FAILURE() << "an unknown layer was accepted";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "sized.json: dtrain hidden_units fan_in_stddev \"nope\" is not the name of a Dense "
              "layer");
  }
}

TEST(KerasJson, ADtrainKeyOfAnotherShapeIsRefusedNamingTheFile) {
  const auto refusal = [](const char* dtrain) {
    json doc = fixture("keras3_mlp.json");
    doc["dtrain"] = json::parse(dtrain);
    try {
      read_keras_json(doc, "d.json");
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(refusal(R"({"kernel_name": "w"})"),
            "d.json: dtrain {\"kernel_name\":\"w\"} is not {\"defaults\": {...}, "
            "\"hidden_units\": {...}}");
  EXPECT_EQ(refusal(R"({"defaults": [1]})"),
            "d.json: dtrain {\"defaults\":[1]} is not {\"defaults\": {...}, "
            "\"hidden_units\": {...}}");
}

TEST(KerasJson, NotJsonAndNotSequentialAreRefusedWithTheSource) {
  EXPECT_THROW(read_keras_json(std::string_view("{"), "bad.json"), UsageError);
  try {
    read_keras_json(json::parse(R"({"class_name": "Functional", "config": {}})"), "f.json");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "f.json: class_name \"Functional\" is not supported (only Sequential)");
  }
}

// A million levels would overflow the stack of whatever copies, compares or prints the value; the
// text is refused before it is parsed, and the message holds none of it.
std::string sequential_of_nested_arrays(int depth) {
  return R"({"class_name": "Sequential", "config": )" + std::string(depth, '[') +
         std::string(depth, ']') + "}";
}

// A syntax error is named by its line and column in the file, where an editor finds it.
TEST(KerasJson, InvalidJsonIsNamedByItsLineAndColumn) {
  using ::testing::HasSubstr;
  using ::testing::Not;
  const std::string text =
      "{\"class_name\": \"Sequential\",\n"
      "  \"config\": {\"layers\": [\n"
      "    {\"class_name\": \"Dense\", \"config\": {\"units\": 10,}}\n"
      "  ]}}\n";
  // The '}' after "10," where a key should be.
  const size_t line_start = text.find("    {");
  const size_t column = text.find(",}") + 1 - line_start + 1;
  try {
    read_keras_json(text, "bad.json");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(),
                HasSubstr(fmt::format("bad.json: not valid JSON: line 3, column {}: ", column)));
    EXPECT_THAT(e.what(), HasSubstr("unexpected '}'"));
    EXPECT_THAT(e.what(), Not(HasSubstr("json.exception")));
  }
}

// A column counts characters: "é" is two bytes of UTF-8 and one column.
TEST(KerasJson, AColumnCountsCharactersNotBytes) {
  using ::testing::HasSubstr;
  const std::string text = "{\"name\": \"\xc3\xa9\", ]";
  try {
    read_keras_json(text, "utf8.json");
    FAIL();
  } catch (const UsageError& e) {
    // {"name": "é", ] -- the ']' is the 15th character and the 16th byte.
    EXPECT_THAT(e.what(), HasSubstr("utf8.json: not valid JSON: line 1, column 15: "));
  }
}

TEST(KerasJson, TextNestedDeeperThanTheLimitIsRefusedBeforeParsing) {
  const std::string deep = sequential_of_nested_arrays(1'000'000);
  try {
    read_keras_json(deep, "deep.json");
    FAIL();
  } catch (const UsageError& e) {
    // The object around the arrays is the first level, so the 64th '[' passes the limit.
    EXPECT_EQ(std::string(e.what()),
              fmt::format("deep.json: line 1, column {}: arrays and objects nest deeper than {} "
                          "levels",
                          deep.find('[') + kMaxJsonNesting, kMaxJsonNesting));
  }
  const std::string shallow = sequential_of_nested_arrays(kMaxJsonNesting - 1);
  EXPECT_THROW(read_keras_json(shallow, "shallow.json"), UsageError);  // parsed, then refused
}

}  // namespace
}  // namespace dtrain
