// build_onnx_graph: the spec's layers walked in order, as build_model walks them, with the current
// value's shape and layout (NHWC or NCHW) tracked.
#include "export/onnx_graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "base/error.h"
#include "nn/conv2d.h"

namespace dtrain {
namespace {

OnnxAttribute ints(std::string name, std::vector<int64_t> values) {
  return {std::move(name), std::move(values), true};
}
OnnxAttribute one_int(std::string name, int64_t value) { return {std::move(name), {value}, false}; }
OnnxAttribute one_float(std::string name, float value) {
  return {std::move(name), {}, false, value};
}

class GraphBuilder {
 public:
  GraphBuilder(const ModelSpec& spec, const ParamSet& params) : spec_(spec), params_(params) {
    graph_.name = spec.name.empty() ? "dtrain" : spec.name;
    graph_.input = {"input", with_batch(spec.input_shape)};
    current_ = graph_.input.name;
    shape_ = spec.input_shape;
  }

  OnnxGraph build(const std::optional<FeatureScale>& feature_scale) {
    if (feature_scale) scale_input(*feature_scale);
    for (index_ = 0; index_ < spec_.layers.size(); ++index_) add(spec_.layers[index_]);
    to_nhwc();
    // dtrain's logits are the last layer's values whatever its shape (num_classes() is its width).
    if (shape_.size() != 1) flatten();
    if (graph_.nodes.empty()) append("Identity", "identity", {current_}, {}, shape_);
    // The last node's output becomes the graph's output.
    const char* output = binary_head_ ? "probability" : "logits";
    graph_.nodes.back().outputs[0] = output;
    graph_.intermediates.pop_back();
    graph_.output = {output, with_batch(shape_)};
    return std::move(graph_);
  }

 private:
  static Shape with_batch(const Shape& shape) {
    Shape out{kOnnxBatch};
    out.insert(out.end(), shape.begin(), shape.end());
    return out;
  }

  // x × numerator / denominator as FeatureScale::apply computes it; x × 1 and x / 1 are x.
  void scale_input(const FeatureScale& scale) {
    for (const auto& [op, value, constant] :
         {std::tuple{"Mul", scale.numerator, "feature_scale/numerator"},
          std::tuple{"Div", scale.denominator, "feature_scale/denominator"}}) {
      if (value == 1) continue;
      graph_.initializers.push_back({constant, {}, {value}, {}, /*is_int64=*/false});
      const std::string name = fmt::format("feature_scale/{}", op);
      graph_.nodes.push_back({op, name, {current_, constant}, {name}, {}});
      graph_.intermediates.push_back({name, with_batch(shape_)});
      current_ = name;
    }
  }

  [[noreturn]] void fail(const std::string& what) const {
    const LayerSpec& layer = spec_.layers[index_];
    throw UsageError(fmt::format("ONNX export: layer {} ({} '{}'): {}", index_,
                                 keras_class_name(layer.kind), layer.name, what));
  }

  const LayerSpec& layer() const { return spec_.layers[index_]; }
  bool is_last() const { return index_ + 1 == spec_.layers.size(); }

  // The value's shape as ONNX sees it: shape_ is always the logical (NHWC) one.
  Shape physical_shape() const {
    if (!nchw_) return with_batch(shape_);
    return {kOnnxBatch, shape_[2], shape_[0], shape_[1]};
  }

  // Appends a node reading inputs and writing one new value of logical shape `shape`.
  void append(const std::string& op_type, const std::string& suffix,
              std::vector<std::string> inputs, std::vector<OnnxAttribute> attributes,
              const Shape& shape) {
    const std::string base = index_ < spec_.layers.size() ? layer().name : "output";
    std::string name = fmt::format("{}/{}", base, suffix);
    while (std::any_of(graph_.nodes.begin(), graph_.nodes.end(),
                       [&](const OnnxNode& node) { return node.name == name; })) {
      name += "_";
    }
    shape_ = shape;
    graph_.nodes.push_back({op_type, name, std::move(inputs), {name}, std::move(attributes)});
    graph_.intermediates.push_back({name, physical_shape()});
    current_ = name;
  }

  void to_nchw() {
    if (nchw_) return;
    nchw_ = true;
    append("Transpose", "to_nchw", {current_}, {ints("perm", {0, 3, 1, 2})}, shape_);
  }

  void to_nhwc() {
    if (!nchw_) return;
    nchw_ = false;
    append("Transpose", "to_nhwc", {current_}, {ints("perm", {0, 2, 3, 1})}, shape_);
  }

  void flatten() {
    append("Flatten", "flatten", {current_}, {one_int("axis", 1)}, {num_elements(shape_)});
  }

  void add(const LayerSpec& spec) {
    switch (spec.kind) {
      case LayerKind::kDense:
        return add_dense(spec);
      case LayerKind::kConv2D:
        return add_conv(spec);
      case LayerKind::kMaxPooling2D:
      case LayerKind::kAveragePooling2D:
        return add_pool(spec);
      case LayerKind::kFlatten:
        to_nhwc();
        return flatten();
      case LayerKind::kReshape:
        return add_reshape(spec);
      case LayerKind::kDropout:
        return;  // the identity at inference
      case LayerKind::kActivation:
        return add_activation(spec.activation);
      case LayerKind::kBatchNormalization:
        return add_batch_norm(spec);
    }
    fail("this layer kind has no ONNX form");
  }

  // The name of a layer's parameter as build_model names it, and its index in params_.
  size_t param(const std::string& given, const char* keras_suffix) const {
    const std::string name =
        given.empty() ? fmt::format("{}/{}", layer().name, keras_suffix) : given;
    const std::optional<size_t> index = params_.find(name);
    if (!index) fail(fmt::format("the weights hold no parameter '{}'", name));
    return *index;
  }

  const std::string& add_initializer(size_t param_index, Shape dims, std::vector<float> values) {
    graph_.initializers.push_back({params_.spec(param_index).name,
                                   std::move(dims),
                                   std::move(values),
                                   {},
                                   /*is_int64=*/false});
    return graph_.initializers.back().name;
  }

  std::vector<float> values_of(size_t param_index) const {
    const std::span<const float> values = params_.values(param_index);
    return {values.begin(), values.end()};
  }

  void add_dense(const LayerSpec& spec) {
    to_nhwc();
    if (shape_.size() != 1) fail(fmt::format("input shape {} is not flat", shape_string(shape_)));
    // dtrain stores the weights (out, in): Gemm's B with transB = 1 is exactly that.
    const size_t w = param(spec.kernel_name, "kernel");
    std::vector<std::string> inputs{current_,
                                    add_initializer(w, params_.spec(w).shape, values_of(w))};
    if (spec.use_bias) {
      const size_t b = param(spec.bias_name, "bias");
      inputs.push_back(add_initializer(b, params_.spec(b).shape, values_of(b)));
    }
    append("Gemm", "dense", std::move(inputs), {one_int("transB", 1)}, {spec.units});
    add_activation(spec.activation);
  }

  // ONNX's pads for TensorFlow's padding: [top, left, bottom, right], the larger half at the end.
  std::vector<int64_t> pads(const AxisGeometry& rows, const AxisGeometry& cols, int window_h,
                            int window_w, const std::array<int, 2>& strides) const {
    const auto after = [](const AxisGeometry& axis, int in, int window, int stride) {
      const int total = std::max((axis.out - 1) * stride + window - in, 0);
      return static_cast<int64_t>(total - axis.pad_before);
    };
    const int h = static_cast<int>(shape_[0]);
    const int w = static_cast<int>(shape_[1]);
    return {rows.pad_before, cols.pad_before, after(rows, h, window_h, strides[0]),
            after(cols, w, window_w, strides[1])};
  }

  void add_conv(const LayerSpec& spec) {
    if (shape_.size() != 3)
      fail(fmt::format("input shape {} is not (h, w, c)", shape_string(shape_)));
    to_nchw();
    const int h = static_cast<int>(shape_[0]);
    const int w = static_cast<int>(shape_[1]);
    const int64_t c_in = shape_[2];
    const auto [kh, kw] = spec.kernel_size;
    const AxisGeometry rows = axis_geometry(h, kh, spec.strides[0], spec.padding);
    const AxisGeometry cols = axis_geometry(w, kw, spec.strides[1], spec.padding);
    if (rows.out <= 0 || cols.out <= 0) fail("the kernel does not fit the input");

    // (KH, KW, C_in, C_out) -> (C_out, C_in, KH, KW).
    const size_t k = param(spec.kernel_name, "kernel");
    const std::span<const float> hwio = params_.values(k);
    const int64_t c_out = spec.filters;
    std::vector<float> oihw(hwio.size());
    for (int64_t y = 0; y < kh; ++y)
      for (int64_t x = 0; x < kw; ++x)
        for (int64_t i = 0; i < c_in; ++i)
          for (int64_t o = 0; o < c_out; ++o)
            oihw[((o * c_in + i) * kh + y) * kw + x] = hwio[((y * kw + x) * c_in + i) * c_out + o];
    std::vector<std::string> inputs{current_, add_initializer(k, {c_out, c_in, kh, kw}, oihw)};
    if (spec.use_bias) {
      const size_t b = param(spec.bias_name, "bias");
      inputs.push_back(add_initializer(b, params_.spec(b).shape, values_of(b)));
    }
    append("Conv", "conv", std::move(inputs),
           {ints("kernel_shape", {kh, kw}), ints("strides", {spec.strides[0], spec.strides[1]}),
            ints("pads", pads(rows, cols, kh, kw, spec.strides)), ints("dilations", {1, 1})},
           {rows.out, cols.out, c_out});
    add_activation(spec.activation);
  }

  void add_pool(const LayerSpec& spec) {
    if (shape_.size() != 3)
      fail(fmt::format("input shape {} is not (h, w, c)", shape_string(shape_)));
    to_nchw();
    const auto [ph, pw] = spec.pool_size;
    const AxisGeometry rows =
        axis_geometry(static_cast<int>(shape_[0]), ph, spec.strides[0], spec.padding);
    const AxisGeometry cols =
        axis_geometry(static_cast<int>(shape_[1]), pw, spec.strides[1], spec.padding);
    if (rows.out <= 0 || cols.out <= 0) fail("the window does not fit the input");
    std::vector<OnnxAttribute> attributes{ints("kernel_shape", {ph, pw}),
                                          ints("strides", {spec.strides[0], spec.strides[1]}),
                                          ints("pads", pads(rows, cols, ph, pw, spec.strides))};
    const bool max = spec.kind == LayerKind::kMaxPooling2D;
    // TensorFlow's SAME average pooling divides by the valid inputs only; ONNX's MaxPool never lets
    // padding win, as dtrain's does not.
    if (!max) attributes.push_back(one_int("count_include_pad", 0));
    append(max ? "MaxPool" : "AveragePool", max ? "max_pool" : "average_pool", {current_},
           std::move(attributes), {rows.out, cols.out, shape_[2]});
  }

  // ONNX's BatchNormalization in inference mode, with the moving statistics: its channels are
  // axis 1, which is where a flat value and an NCHW image have them.
  void add_batch_norm(const LayerSpec& spec) {
    if (shape_.size() == 3) {
      to_nchw();
    } else if (shape_.size() != 1) {
      fail(fmt::format("input shape {} is neither flat nor (h, w, c)", shape_string(shape_)));
    }
    const int64_t channels = shape_.back();
    auto vector = [&](bool present, const char* suffix, float absent) {
      if (present) {
        const size_t p = param("", suffix);
        return add_initializer(p, {channels}, values_of(p));
      }
      // Keras' scale=False or center=False: gamma 1, beta 0.
      graph_.initializers.push_back({fmt::format("{}/{}", layer().name, suffix),
                                     {channels},
                                     std::vector<float>(static_cast<size_t>(channels), absent),
                                     {},
                                     /*is_int64=*/false});
      return graph_.initializers.back().name;
    };
    std::vector<std::string> inputs{current_};
    inputs.push_back(vector(spec.scale, "gamma", 1.0f));
    inputs.push_back(vector(spec.center, "beta", 0.0f));
    inputs.push_back(vector(true, "moving_mean", 0.0f));
    inputs.push_back(vector(true, "moving_variance", 1.0f));
    append("BatchNormalization", "batch_norm", std::move(inputs),
           {one_float("epsilon", spec.epsilon)}, shape_);
  }

  void add_reshape(const LayerSpec& spec) {
    to_nhwc();
    // Keras lets one dimension be -1; build_model has checked that the sizes agree.
    Shape target = spec.target_shape;
    int64_t known = 1;
    for (const int64_t d : target) known *= d == -1 ? 1 : d;
    for (int64_t& d : target)
      if (d == -1) d = num_elements(shape_) / known;
    if (num_elements(target) != num_elements(shape_))
      fail(fmt::format("target_shape {} does not hold input shape {}",
                       shape_string(spec.target_shape), shape_string(shape_)));
    // 0 keeps the input's (batch) dimension.
    std::vector<int64_t> onnx_shape{0};
    onnx_shape.insert(onnx_shape.end(), target.begin(), target.end());
    const std::string shape_name = layer().name + "/shape";
    graph_.initializers.push_back({shape_name,
                                   {static_cast<int64_t>(onnx_shape.size())},
                                   {},
                                   onnx_shape,
                                   /*is_int64=*/true});
    append("Reshape", "reshape", {current_, shape_name}, {}, target);
  }

  void add_activation(ActivationKind kind) {
    switch (kind) {
      case ActivationKind::kLinear:
        return;
      case ActivationKind::kRelu:
        return append("Relu", "relu", {current_}, {}, shape_);
      case ActivationKind::kTanh:
        return append("Tanh", "tanh", {current_}, {}, shape_);
      case ActivationKind::kSigmoid:
        // dtrain's loss applies a binary head's sigmoid; ONNX's consumers get the probability.
        binary_head_ = is_last() && num_elements(shape_) == 1;
        return append("Sigmoid", "sigmoid", {current_}, {}, shape_);
      case ActivationKind::kSoftmax:
        // build_model drops a final softmax (the loss applies it) and refuses any other.
        if (is_last()) return;
        fail("softmax is only supported as the model's last activation");
    }
  }

  const ModelSpec& spec_;
  const ParamSet& params_;
  OnnxGraph graph_;
  size_t index_ = 0;
  std::string current_;       // the value the next node reads
  Shape shape_;               // its logical shape without the batch: (h, w, c) for an image
  bool nchw_ = false;         // whether the value is laid out (c, h, w)
  bool binary_head_ = false;  // the model ends in Dense(1, activation="sigmoid")
};

}  // namespace

const OnnxAttribute* OnnxNode::attribute(const std::string& attribute_name) const {
  for (const OnnxAttribute& a : attributes)
    if (a.name == attribute_name) return &a;
  return nullptr;
}

OnnxGraph build_onnx_graph(const ModelSpec& spec, const ParamSet& params,
                           const std::optional<FeatureScale>& feature_scale) {
  return GraphBuilder(spec, params).build(feature_scale);
}

}  // namespace dtrain
