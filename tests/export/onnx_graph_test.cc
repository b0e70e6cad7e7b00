// The ONNX graph of a model spec: its nodes, the layouts (the transposes around the convolutions,
// the weights in ONNX's order), TensorFlow's SAME padding as explicit pads, and the encoding.
#include "export/onnx_graph.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>

#include "export/onnx_export.h"
#include "export/onnx_proto/onnx.pb.h"
#include "nn/keras_json.h"
#include "nn/model_zoo.h"

namespace dtrain {
namespace {

using ::testing::ElementsAre;

// A Keras Sequential model of these layers (JSON objects without the brackets) on input `input`.
ModelSpec keras_spec(const std::string& input, const std::string& layers) {
  return read_keras_json(
      R"({"class_name": "Sequential", "config": {"name": "m", "layers": [
          {"class_name": "InputLayer", "config": {"batch_input_shape": )" +
          input + R"(, "name": "in"}}, )" + layers + "]}}",
      "test model");
}

// The spec's parameters, each value its own index in the arena's order, so that a test can tell
// where every weight went.
ParamSet numbered_params(const ModelSpec& spec) {
  ParamSet params(build_model(spec)->param_specs());
  float next = 0;
  for (size_t i = 0; i < params.count(); ++i)
    for (float& v : params.values(i)) v = next++;
  return params;
}

std::vector<std::string> op_types(const OnnxGraph& graph) {
  std::vector<std::string> ops;
  for (const OnnxNode& node : graph.nodes) ops.push_back(node.op_type);
  return ops;
}

const OnnxInitializer& initializer(const OnnxGraph& graph, const std::string& name) {
  for (const OnnxInitializer& init : graph.initializers)
    if (init.name == name) return init;
  throw std::runtime_error("no initializer " + name);
}

const Shape& shape_of(const OnnxGraph& graph, const std::string& value) {
  for (const OnnxValue& v : graph.intermediates)
    if (v.name == value) return v.shape;
  throw std::runtime_error("no value " + value);
}

TEST(OnnxGraph, MnistInferenceIsTwoGemmsOnDtrainsWeightsUnchanged) {
  const ModelSpec spec = model_spec({.name = "mnist_inference"});
  const ParamSet params = numbered_params(spec);
  const OnnxGraph graph = build_onnx_graph(spec, params);

  EXPECT_THAT(op_types(graph), ElementsAre("Gemm", "Relu", "Gemm"));
  EXPECT_EQ(graph.input.name, "input");
  EXPECT_THAT(graph.input.shape, ElementsAre(kOnnxBatch, 784));
  EXPECT_EQ(graph.output.name, "logits");
  EXPECT_THAT(graph.output.shape, ElementsAre(kOnnxBatch, 10));
  EXPECT_THAT(graph.nodes.back().outputs, ElementsAre("logits"));
  // dtrain stores Dense weights (out, in): Gemm's B with transB = 1, copied as they are.
  const OnnxNode& gemm = graph.nodes[0];
  ASSERT_NE(gemm.attribute("transB"), nullptr);
  EXPECT_EQ(gemm.attribute("transB")->ints, std::vector<int64_t>{1});
  EXPECT_THAT(gemm.inputs, ElementsAre("input", "layer1/weights", "layer1/biases"));
  const OnnxInitializer& w = initializer(graph, "layer1/weights");
  EXPECT_THAT(w.dims, ElementsAre(500, 784));
  const std::span<const float> stored = params.values(*params.find("layer1/weights"));
  EXPECT_TRUE(std::equal(stored.begin(), stored.end(), w.floats.begin(), w.floats.end()));
  // Every value but the output has a recorded shape.
  EXPECT_EQ(graph.intermediates.size(), graph.nodes.size() - 1);
  EXPECT_THAT(shape_of(graph, graph.nodes[1].outputs[0]), ElementsAre(kOnnxBatch, 500));
}

TEST(OnnxGraph, AFeatureScaleOpensTheGraphWithAMulAndADivOfItsParts) {
  const ModelSpec spec = model_spec({.name = "softmax"});
  const ParamSet params = numbered_params(spec);
  const OnnxGraph plain = build_onnx_graph(spec, params);
  const OnnxGraph scaled = build_onnx_graph(spec, params, parse_feature_scale("3/255"));
  EXPECT_THAT(op_types(scaled), ElementsAre("Mul", "Div", "Gemm"));
  EXPECT_EQ(scaled.nodes.size(), plain.nodes.size() + 2);
  EXPECT_THAT(scaled.nodes[0].inputs, ElementsAre("input", "feature_scale/numerator"));
  EXPECT_THAT(scaled.nodes[1].inputs,
              ElementsAre(scaled.nodes[0].outputs[0], "feature_scale/denominator"));
  EXPECT_EQ(scaled.nodes[2].inputs[0], scaled.nodes[1].outputs[0]);
  EXPECT_THAT(initializer(scaled, "feature_scale/numerator").floats, ElementsAre(3.0f));
  EXPECT_THAT(initializer(scaled, "feature_scale/denominator").floats, ElementsAre(255.0f));
  EXPECT_TRUE(initializer(scaled, "feature_scale/denominator").dims.empty());  // a scalar
  EXPECT_EQ(shape_of(scaled, scaled.nodes[0].outputs[0]), (Shape{kOnnxBatch, 784}));
  // A part that is 1 changes nothing, and has no node.
  EXPECT_THAT(op_types(build_onnx_graph(spec, params, parse_feature_scale("1/255"))),
              ElementsAre("Div", "Gemm"));
  EXPECT_THAT(op_types(build_onnx_graph(spec, params, parse_feature_scale("0.5"))),
              ElementsAre("Mul", "Gemm"));
}

TEST(OnnxGraph, ConvolutionKernelsAreTransposedFromHwioToOihw) {
  // 2x3 kernel, 2 input channels, 3 filters: dtrain's (KH, KW, C_in, C_out) = (2, 3, 2, 3).
  const ModelSpec spec = keras_spec("[null, 4, 5, 2]", R"(
      {"class_name": "Conv2D", "config": {"name": "c", "filters": 3, "kernel_size": [2, 3],
       "padding": "valid"}},
      {"class_name": "Flatten", "config": {"name": "f"}},
      {"class_name": "Dense", "config": {"name": "d", "units": 2}})");
  const ParamSet params = numbered_params(spec);
  const OnnxGraph graph = build_onnx_graph(spec, params);

  const OnnxInitializer& k = initializer(graph, "c/kernel");
  ASSERT_THAT(k.dims, ElementsAre(3, 2, 2, 3));
  const std::span<const float> hwio = params.values(*params.find("c/kernel"));
  for (int o = 0; o < 3; ++o)
    for (int i = 0; i < 2; ++i)
      for (int y = 0; y < 2; ++y)
        for (int x = 0; x < 3; ++x)
          ASSERT_EQ(k.floats[((o * 2 + i) * 2 + y) * 3 + x], hwio[((y * 3 + x) * 2 + i) * 3 + o])
              << o << i << y << x;
}

TEST(OnnxGraph, TransposesBracketEachRunOfConvolutionsAndPoolings) {
  // lenet: input (28, 28, 1), conv, pool, conv, pool, Flatten, Dense, Dense.
  const ModelSpec spec = model_spec({.name = "lenet"});
  const OnnxGraph graph = build_onnx_graph(spec, numbered_params(spec));

  EXPECT_THAT(op_types(graph),
              ElementsAre("Transpose", "Conv", "Relu", "MaxPool", "Conv", "Relu", "MaxPool",
                          "Transpose", "Flatten", "Gemm", "Relu", "Gemm"));
  EXPECT_THAT(graph.input.shape, ElementsAre(kOnnxBatch, 28, 28, 1));
  const OnnxNode& to_nchw = graph.nodes[0];
  const OnnxNode& to_nhwc = graph.nodes[7];
  EXPECT_EQ(to_nchw.inputs[0], "input");
  EXPECT_EQ(to_nchw.attribute("perm")->ints, (std::vector<int64_t>{0, 3, 1, 2}));
  EXPECT_EQ(to_nhwc.attribute("perm")->ints, (std::vector<int64_t>{0, 2, 3, 1}));
  // Values between the transposes are NCHW; the flattened one has dtrain's (h, w, c) order.
  EXPECT_THAT(shape_of(graph, to_nchw.outputs[0]), ElementsAre(kOnnxBatch, 1, 28, 28));
  EXPECT_THAT(shape_of(graph, graph.nodes[6].outputs[0]), ElementsAre(kOnnxBatch, 64, 7, 7));
  EXPECT_THAT(shape_of(graph, to_nhwc.outputs[0]), ElementsAre(kOnnxBatch, 7, 7, 64));
  EXPECT_THAT(shape_of(graph, graph.nodes[8].outputs[0]), ElementsAre(kOnnxBatch, 3136));
  EXPECT_EQ(graph.nodes[8].attribute("axis")->ints, std::vector<int64_t>{1});
}

TEST(OnnxGraph, AReshapeKeepsTheBatchAndResolvesKerasMinusOne) {
  const ModelSpec spec = keras_spec("[null, 784]", R"(
      {"class_name": "Reshape", "config": {"name": "r", "target_shape": [-1, 28, 1]}},
      {"class_name": "Conv2D", "config": {"name": "c", "filters": 2, "kernel_size": [3, 3]}},
      {"class_name": "Reshape", "config": {"name": "back", "target_shape": [1352]}},
      {"class_name": "Dense", "config": {"name": "d", "units": 3}})");
  const OnnxGraph graph = build_onnx_graph(spec, numbered_params(spec));

  EXPECT_THAT(op_types(graph),
              ElementsAre("Reshape", "Transpose", "Conv", "Transpose", "Reshape", "Gemm"));
  // 0 keeps the input's batch dimension.
  EXPECT_THAT(initializer(graph, graph.nodes[0].inputs[1]).int64s, ElementsAre(0, 28, 28, 1));
  EXPECT_TRUE(initializer(graph, graph.nodes[0].inputs[1]).is_int64);
  EXPECT_THAT(shape_of(graph, graph.nodes[0].outputs[0]), ElementsAre(kOnnxBatch, 28, 28, 1));
  EXPECT_THAT(initializer(graph, graph.nodes[4].inputs[1]).int64s, ElementsAre(0, 1352));
}

TEST(OnnxGraph, SamePaddingPutsTheExtraPadAtTheEndAsTensorFlowDoes) {
  const ModelSpec spec = keras_spec("[null, 28, 28, 1]", R"(
      {"class_name": "Conv2D", "config": {"name": "strided", "filters": 2, "kernel_size": [3, 3],
       "strides": [2, 2], "padding": "same"}},
      {"class_name": "Conv2D", "config": {"name": "even", "filters": 2, "kernel_size": [4, 4],
       "padding": "same"}},
      {"class_name": "Conv2D", "config": {"name": "valid", "filters": 2, "kernel_size": [3, 3],
       "padding": "valid"}},
      {"class_name": "Flatten", "config": {"name": "f"}},
      {"class_name": "Dense", "config": {"name": "d", "units": 3}})");
  const OnnxGraph graph = build_onnx_graph(spec, numbered_params(spec));

  std::vector<const OnnxNode*> convs;
  for (const OnnxNode& node : graph.nodes)
    if (node.op_type == "Conv") convs.push_back(&node);
  ASSERT_EQ(convs.size(), 3u);
  // 28 rows, kernel 3, stride 2: 14 outputs need 13·2 + 3 - 28 = 1 pad, after.
  EXPECT_THAT(convs[0]->attribute("pads")->ints, ElementsAre(0, 0, 1, 1));
  EXPECT_THAT(convs[0]->attribute("strides")->ints, ElementsAre(2, 2));
  // 14 rows, kernel 4, stride 1: 3 pads, 1 before and 2 after.
  EXPECT_THAT(convs[1]->attribute("pads")->ints, ElementsAre(1, 1, 2, 2));
  EXPECT_THAT(convs[2]->attribute("pads")->ints, ElementsAre(0, 0, 0, 0));
  EXPECT_THAT(shape_of(graph, convs[2]->outputs[0]), ElementsAre(kOnnxBatch, 2, 12, 12));
  EXPECT_EQ(convs[0]->attribute("auto_pad"), nullptr);
}

// Inference-mode BatchNormalization on the moving statistics, over the channels of NCHW after a
// convolution and of a flat value after a Dense; a missing gamma or beta is Keras' 1 or 0.
TEST(OnnxGraph, BatchNormalizationNormalisesChannelsByTheMovingStatistics) {
  const ModelSpec spec = keras_spec("[null, 4, 4, 1]", R"(
      {"class_name": "Conv2D", "config": {"name": "c", "filters": 2, "kernel_size": 3}},
      {"class_name": "BatchNormalization", "config": {"name": "bn", "epsilon": 0.01}},
      {"class_name": "Flatten", "config": {"name": "f"}},
      {"class_name": "Dense", "config": {"name": "d", "units": 3}},
      {"class_name": "BatchNormalization", "config": {"name": "bn2", "center": false}})");
  const ParamSet params = numbered_params(spec);
  const OnnxGraph graph = build_onnx_graph(spec, params);
  EXPECT_THAT(op_types(graph), ElementsAre("Transpose", "Conv", "BatchNormalization", "Transpose",
                                           "Flatten", "Gemm", "BatchNormalization"));
  const OnnxNode& bn = graph.nodes[2];
  EXPECT_THAT(bn.inputs,
              ElementsAre("c/conv", "bn/gamma", "bn/beta", "bn/moving_mean", "bn/moving_variance"));
  ASSERT_NE(bn.attribute("epsilon"), nullptr);
  EXPECT_FLOAT_EQ(*bn.attribute("epsilon")->real, 0.01f);
  const std::span<const float> mean = params.values(params.index("bn/moving_mean"));
  EXPECT_THAT(initializer(graph, "bn/moving_mean").floats, ElementsAre(mean[0], mean[1]));
  EXPECT_THAT(initializer(graph, "bn2/beta").floats, ElementsAre(0, 0, 0));
  EXPECT_EQ(graph.output.name, "logits");
}

// A binary head keeps its sigmoid, and its output is the probability.
TEST(OnnxGraph, ABinaryHeadEndsInItsSigmoidAndOutputsTheProbability) {
  const ModelSpec spec = keras_spec("[null, 5]", R"(
      {"class_name": "Dense", "config": {"name": "d", "units": 1, "activation": "sigmoid"}})");
  const OnnxGraph graph = build_onnx_graph(spec, numbered_params(spec));
  EXPECT_THAT(op_types(graph), ElementsAre("Gemm", "Sigmoid"));
  EXPECT_EQ(graph.output.name, "probability");
  EXPECT_EQ(graph.output.shape, (Shape{kOnnxBatch, 1}));
  EXPECT_EQ(graph.nodes.back().outputs[0], "probability");
}

TEST(OnnxGraph, AveragePoolingLeavesPaddingOutOfTheCount) {
  const ModelSpec spec = keras_spec("[null, 7, 7, 3]", R"(
      {"class_name": "AveragePooling2D", "config": {"name": "avg", "pool_size": [2, 2],
       "padding": "same"}},
      {"class_name": "MaxPooling2D", "config": {"name": "max", "pool_size": [3, 3],
       "strides": [1, 1], "padding": "valid"}},
      {"class_name": "Flatten", "config": {"name": "f"}},
      {"class_name": "Dense", "config": {"name": "d", "units": 3}})");
  const OnnxGraph graph = build_onnx_graph(spec, numbered_params(spec));

  EXPECT_THAT(op_types(graph),
              ElementsAre("Transpose", "AveragePool", "MaxPool", "Transpose", "Flatten", "Gemm"));
  const OnnxNode& avg = graph.nodes[1];
  EXPECT_EQ(avg.attribute("count_include_pad")->ints, std::vector<int64_t>{0});
  EXPECT_FALSE(avg.attribute("count_include_pad")->is_list);
  EXPECT_THAT(avg.attribute("pads")->ints, ElementsAre(0, 0, 1, 1));
  EXPECT_THAT(shape_of(graph, avg.outputs[0]), ElementsAre(kOnnxBatch, 3, 4, 4));
  EXPECT_THAT(shape_of(graph, graph.nodes[2].outputs[0]), ElementsAre(kOnnxBatch, 3, 2, 2));
}

TEST(OnnxGraph, DropoutAndTheFinalSoftmaxLeaveNoNode) {
  const ModelSpec spec = keras_spec("[null, 6]", R"(
      {"class_name": "Dense", "config": {"name": "h", "units": 4, "activation": "tanh"}},
      {"class_name": "Dropout", "config": {"name": "drop", "rate": 0.5}},
      {"class_name": "Activation", "config": {"name": "s", "activation": "sigmoid"}},
      {"class_name": "Dense", "config": {"name": "o", "units": 3, "activation": "softmax"}})");
  const OnnxGraph graph = build_onnx_graph(spec, numbered_params(spec));
  EXPECT_THAT(op_types(graph), ElementsAre("Gemm", "Tanh", "Sigmoid", "Gemm"));
  EXPECT_THAT(graph.output.shape, ElementsAre(kOnnxBatch, 3));
}

TEST(OnnxGraph, EncodesAsAnOnnxModelOfOpset13WithLittleEndianWeights) {
  const ModelSpec spec = model_spec({.name = "softmax"});
  const OnnxGraph graph = build_onnx_graph(spec, numbered_params(spec));
  const std::string bytes =
      encode_onnx_model(graph, {.doc_string = "doc", .metadata = {{"global_step", "7"}}});

  onnx::ModelProto model;
  ASSERT_TRUE(model.ParseFromString(bytes));
  EXPECT_EQ(model.ir_version(), kOnnxIrVersion);
  ASSERT_EQ(model.opset_import_size(), 1);
  EXPECT_EQ(model.opset_import(0).domain(), "");
  EXPECT_EQ(model.opset_import(0).version(), 13);
  ASSERT_EQ(model.metadata_props_size(), 1);
  EXPECT_EQ(model.metadata_props(0).key(), "global_step");
  EXPECT_EQ(model.metadata_props(0).value(), "7");
  const onnx::GraphProto& g = model.graph();
  ASSERT_EQ(g.input_size(), 1);
  const onnx::TensorShapeProto& in = g.input(0).type().tensor_type().shape();
  ASSERT_EQ(in.dim_size(), 2);
  EXPECT_EQ(in.dim(0).dim_param(), "batch");
  EXPECT_EQ(in.dim(1).dim_value(), 784);
  ASSERT_EQ(g.output_size(), 1);
  EXPECT_EQ(g.output(0).name(), "logits");
  ASSERT_EQ(g.initializer_size(), 2);
  const onnx::TensorProto& w = g.initializer(0);
  EXPECT_EQ(w.data_type(), onnx::TensorProto::FLOAT);
  ASSERT_EQ(w.raw_data().size(), 784u * 10u * 4u);
  // The second value (1.0f) as ONNX stores it: little-endian bytes 00 00 80 3f.
  EXPECT_EQ(w.raw_data().substr(4, 4), std::string("\x00\x00\x80\x3f", 4));
}

}  // namespace
}  // namespace dtrain
