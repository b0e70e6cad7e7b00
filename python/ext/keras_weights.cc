// The spec's layers say which of the model's parameters are whose: the names build_model gives
// them ("<layer>/kernel" unless the file names them), as the ONNX export finds them.
#include "ext/keras_weights.h"

#include <fmt/format.h>

#include <stdexcept>

namespace dtrain::python {
namespace {

const ParamSpec& param_named(const std::vector<ParamSpec>& params, const std::string& name) {
  for (const ParamSpec& p : params) {
    if (p.name == name) return p;
  }
  throw std::logic_error(fmt::format("the model has no parameter '{}'", name));
}

std::string own_name(const std::string& given, const LayerSpec& layer, const char* suffix) {
  return given.empty() ? fmt::format("{}/{}", layer.name, suffix) : given;
}

}  // namespace

std::vector<KerasWeight> keras_weights(const ModelSpec& spec,
                                       const std::vector<ParamSpec>& params) {
  std::vector<KerasWeight> weights;
  auto add = [&](size_t layer, const std::string& name, bool transpose) {
    const ParamSpec& p = param_named(params, name);
    Shape shape = p.shape;
    if (transpose) shape = {p.shape[1], p.shape[0]};
    weights.push_back({name, shape, transpose, layer, p.trainable});
  };
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const LayerSpec& layer = spec.layers[i];
    switch (layer.kind) {
      case LayerKind::kDense:
        add(i, own_name(layer.kernel_name, layer, "kernel"), /*transpose=*/true);
        if (layer.use_bias) add(i, own_name(layer.bias_name, layer, "bias"), false);
        break;
      case LayerKind::kConv2D:
        add(i, own_name(layer.kernel_name, layer, "kernel"), false);
        if (layer.use_bias) add(i, own_name(layer.bias_name, layer, "bias"), false);
        break;
      case LayerKind::kBatchNormalization:
        if (layer.scale) add(i, own_name("", layer, "gamma"), false);
        if (layer.center) add(i, own_name("", layer, "beta"), false);
        add(i, own_name("", layer, "moving_mean"), false);
        add(i, own_name("", layer, "moving_variance"), false);
        break;
      default:
        break;
    }
  }
  return weights;
}

std::vector<float> transposed(const std::vector<float>& values, int64_t rows, int64_t columns) {
  std::vector<float> out(values.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < columns; ++c) out[c * rows + r] = values[r * columns + c];
  }
  return out;
}

}  // namespace dtrain::python
