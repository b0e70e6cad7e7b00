// libFuzzer target for a model's shapes and sizes (nn/model_plan.h), the check build_model runs
// before it builds or allocates anything. The input chooses a spec: an input shape and up to 12
// layers whose sizes run from 1 to past 2^31 (Reshape targets to 2^62), written as Keras JSON and
// read back as `dtrain train --model file.json` reads it, then planned under a 64 MiB cap.
// UsageError (TooLargeError included) is the expected refusal. A finding: a refusal of more than
// one line, any other exception, a sanitizer report (a signal, an overflow), or an accepted plan
// over the cap or whose totals do not add up. An accepted plan's parameters are then allocated, as
// the model's arena would be, so a plan that understated them would pass the fuzzer's RSS limit.
#include <fuzzer/FuzzedDataProvider.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/checked_math.h"
#include "base/error.h"
#include "nn/keras_json.h"
#include "nn/keras_json_writer.h"
#include "nn/model_plan.h"

namespace {

constexpr uint64_t kCapBytes = uint64_t{64} << 20;
constexpr int kMaxLayers = 12;

void require(bool holds, const char* property) {
  if (holds) return;
  std::fprintf(stderr, "model_spec_fuzzer: %s\n", property);
  std::abort();
}

// Small sizes most of the time, so that specs get deep; the edges of int and of memory otherwise.
int64_t pick_size(FuzzedDataProvider& in, int64_t most) {
  static constexpr std::array<int64_t, 10> kEdges = {1,
                                                     2,
                                                     3,
                                                     28,
                                                     46341,
                                                     65536,
                                                     (int64_t{1} << 30),
                                                     (int64_t{1} << 31) - 1,
                                                     int64_t{1} << 31,
                                                     int64_t{1} << 62};
  int64_t size = 0;
  switch (in.ConsumeIntegralInRange(0, 3)) {
    case 0:
    case 1:
      size = in.ConsumeIntegralInRange<int64_t>(1, 64);
      break;
    case 2:
      size = kEdges[in.ConsumeIntegralInRange<size_t>(0, kEdges.size() - 1)];
      break;
    default:
      size = in.ConsumeIntegralInRange<int64_t>(1, most);
      break;
  }
  return std::min(size, most);
}

int pick_int(FuzzedDataProvider& in) { return static_cast<int>(pick_size(in, 1 << 30)); }

dtrain::LayerSpec pick_layer(FuzzedDataProvider& in, size_t index) {
  using dtrain::LayerKind;
  static constexpr std::array<LayerKind, 9> kKinds = {LayerKind::kDense,
                                                      LayerKind::kConv2D,
                                                      LayerKind::kMaxPooling2D,
                                                      LayerKind::kAveragePooling2D,
                                                      LayerKind::kFlatten,
                                                      LayerKind::kReshape,
                                                      LayerKind::kDropout,
                                                      LayerKind::kActivation,
                                                      LayerKind::kBatchNormalization};
  dtrain::LayerSpec layer;
  layer.kind = kKinds[in.ConsumeIntegralInRange<size_t>(0, kKinds.size() - 1)];
  layer.name = "layer_" + std::to_string(index);
  layer.use_bias = in.ConsumeBool();
  layer.activation =
      in.ConsumeBool() ? dtrain::ActivationKind::kRelu : dtrain::ActivationKind::kLinear;
  layer.padding = in.ConsumeBool() ? dtrain::Padding::kSame : dtrain::Padding::kValid;
  switch (layer.kind) {
    case LayerKind::kDense:
      layer.units = pick_int(in);
      break;
    case LayerKind::kConv2D:
      layer.filters = pick_int(in);
      layer.kernel_size = {pick_int(in), pick_int(in)};
      layer.strides = {pick_int(in), pick_int(in)};
      break;
    case LayerKind::kMaxPooling2D:
    case LayerKind::kAveragePooling2D:
      layer.pool_size = {pick_int(in), pick_int(in)};
      layer.strides = {pick_int(in), pick_int(in)};
      break;
    case LayerKind::kReshape: {
      const size_t rank = in.ConsumeIntegralInRange<size_t>(1, 4);
      for (size_t i = 0; i < rank; ++i)
        layer.target_shape.push_back(in.ConsumeBool() ? -1 : pick_size(in, int64_t{1} << 62));
      break;
    }
    case LayerKind::kDropout:
      layer.rate = 0.5f;
      break;
    case LayerKind::kBatchNormalization:
      layer.center = in.ConsumeBool();
      layer.scale = in.ConsumeBool();
      break;
    case LayerKind::kFlatten:
    case LayerKind::kActivation:
      break;
  }
  return layer;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  dtrain::ModelSpec chosen;
  chosen.name = "fuzz";
  const size_t rank = in.ConsumeIntegralInRange<size_t>(1, 3);
  for (size_t i = 0; i < rank; ++i) chosen.input_shape.push_back(pick_size(in, int64_t{1} << 40));
  const int layers = in.ConsumeIntegralInRange(1, kMaxLayers);
  for (int i = 0; i < layers; ++i) chosen.layers.push_back(pick_layer(in, i));

  dtrain::ModelSpec spec;
  try {
    spec = dtrain::read_keras_json(dtrain::to_keras_json(chosen).dump(), "fuzz.json");
  } catch (const dtrain::UsageError&) {
    return 0;  // a size the Keras reader itself bounds (units beyond 2^30, a -1 twice)
  }
  dtrain::ModelPlan plan;
  try {
    plan = dtrain::plan_model(spec, kCapBytes, "fuzz.json");
  } catch (const dtrain::UsageError& refused) {
    require(std::string(refused.what()).find('\n') == std::string::npos,
            "a refusal is more than one line");
    return 0;
  }
  require(plan.layers.size() == spec.layers.size(), "a plan has one entry per layer");
  require(plan.bytes >= 0 && static_cast<uint64_t>(plan.bytes) <= kCapBytes,
          "an accepted plan is within the cap");
  int64_t parameters = 0;
  for (const dtrain::LayerPlan& layer : plan.layers) {
    require(layer.parameters >= 0 && layer.activations >= 0 && layer.working >= 0,
            "a layer's sizes are not negative");
    for (int64_t d : layer.output_shape) require(d > 0, "an accepted shape is positive");
    parameters += layer.parameters;
  }
  require(parameters == plan.parameters, "the layers' parameters add up to the model's");
  require(static_cast<uint64_t>(dtrain::saturating_mul(parameters, 8)) <= kCapBytes,
          "parameters and their gradients fit the cap");
  // What the model's arena would hold, allocated and touched.
  std::vector<float> arena(static_cast<size_t>(parameters), 1.0f);
  require(arena.empty() || arena.back() == 1.0f, "the arena holds what was written");
  return 0;
}
