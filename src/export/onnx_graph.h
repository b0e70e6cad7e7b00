// A dtrain model as an ONNX graph (opset 13), before any encoding: the nodes, the weights as
// initialisers in ONNX's layouts, and every value's shape. onnx_export.h encodes it.
//
// Layouts. dtrain's activations are NHWC and its kernels (KH, KW, C_in, C_out), as Keras and
// TensorFlow have them; ONNX's Conv, MaxPool and AveragePool take NCHW and (C_out, C_in, KH, KW).
// The graph's input stays NHWC (the model's input shape, as Keras gives it), a Transpose to NCHW
// goes before the first convolution or pooling of a run of them, and a Transpose back to NHWC
// before a Flatten, Reshape, Dense or the output, so that a flattened image has dtrain's (h, w, c)
// order and dtrain's Dense weights apply unchanged.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/feature_scale.h"
#include "nn/model_spec.h"
#include "nn/param_set.h"

namespace dtrain {

// The symbolic batch dimension in OnnxValue::shape.
constexpr int64_t kOnnxBatch = -1;

// An integer, integer-list or float attribute (the only kinds these nodes need).
struct OnnxAttribute {
  std::string name;
  std::vector<int64_t> ints;
  bool is_list = true;                       // false: a single int, ints[0]
  std::optional<float> real = std::nullopt;  // set: a single float, and ints is unused

  bool operator==(const OnnxAttribute&) const = default;
};

struct OnnxNode {
  std::string op_type;  // "Conv", "Gemm", "Transpose", ...
  std::string name;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::vector<OnnxAttribute> attributes;

  // The attribute with this name, or nullptr.
  const OnnxAttribute* attribute(const std::string& attribute_name) const;
};

// A constant: float32 values (weights) or int64 values (a Reshape's target shape).
struct OnnxInitializer {
  std::string name;
  Shape dims;
  std::vector<float> floats;
  std::vector<int64_t> int64s;
  bool is_int64 = false;
};

// A float32 value of the graph; shape[0] is kOnnxBatch.
struct OnnxValue {
  std::string name;
  Shape shape;
};

struct OnnxGraph {
  std::string name;
  OnnxValue input;  // "input": (batch, the model's input shape)
  // "logits": (batch, classes); a binary head's "probability": (batch, 1), its sigmoid kept.
  OnnxValue output;
  std::vector<OnnxNode> nodes;  // in execution order
  std::vector<OnnxInitializer> initializers;
  std::vector<OnnxValue> intermediates;  // every node output but the graph's output
};

// The graph of spec with the weights in params. spec is one build_model accepted (the layers it
// drops are dropped here too: Dropout, a softmax that ends the model) and params has that model's
// layout. With a feature scale, the graph opens with a Mul by its numerator and a Div by its
// denominator (each left out where it is 1), the float32 operations dtrain applies as it reads
// numeric features, so that the graph takes the features as the files hold them. Throws
// UsageError naming the layer for a spec it cannot express (none today, but a layer kind added to
// dtrain and not here is caught).
OnnxGraph build_onnx_graph(const ModelSpec& spec, const ParamSet& params,
                           const std::optional<FeatureScale>& feature_scale = std::nullopt);

}  // namespace dtrain
