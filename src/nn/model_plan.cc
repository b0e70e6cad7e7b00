// plan_model: the spec walked layer by layer as build_model walks it, with the current shape, the
// sizes in saturating arithmetic and the running total of bytes checked after every layer.
#include "nn/model_plan.h"

#include <fmt/format.h>

#include <limits>

#include "base/checked_math.h"
#include "base/error.h"
#include "base/machine_memory.h"

namespace dtrain {
namespace {

constexpr int64_t kFloatBytes = 4;
// Layers and their kernels count an example's values, a dimension and a Conv2D patch in int.
constexpr int64_t kMaxIndexed = std::numeric_limits<int>::max();

std::string count_text(int64_t count) {
  return count == kSaturatedSize ? std::string("more than 2^63") : fmt::format("{}", count);
}

int64_t elements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n = saturating_mul(n, d);
  return n;
}

class Planner {
 public:
  Planner(const ModelSpec& spec, const AllocationLimit& limit, const std::string& source)
      : spec_(spec), limit_(limit), source_(source), shape_(spec.input_shape) {}

  ModelPlan plan() {
    if (spec_.layers.empty()) throw UsageError(fmt::format("{}: the model has no layers", source_));
    if (spec_.input_shape.empty() || !fits_index(spec_.input_shape)) {
      throw UsageError(fmt::format(
          "{}: input shape {} is not a shape of positive sizes whose product is at most {}",
          source_, shape_string(spec_.input_shape), kMaxIndexed));
    }
    plan_.bytes = saturating_mul(elements(shape_), kFloatBytes);
    for (index_ = 0; index_ < spec_.layers.size(); ++index_) {
      LayerPlan layer = plan_layer(spec_.layers[index_]);
      charge(layer);
      // After the sizes, so that a layer too large for memory is refused as such.
      check_indexed(spec_.layers[index_], layer);
      shape_ = layer.output_shape;
      plan_.layers.push_back(std::move(layer));
    }
    return std::move(plan_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw UsageError(message(what)); }
  std::string message(const std::string& what) const {
    const LayerSpec& layer = spec_.layers[index_];
    return fmt::format("{}: layer {} ({} '{}'): {}", source_, index_, keras_class_name(layer.kind),
                       layer.name, what);
  }

  static bool fits_index(const Shape& shape) {
    for (int64_t d : shape) {
      if (d <= 0) return false;
    }
    return elements(shape) <= kMaxIndexed;
  }

  void require_rank(size_t rank, const char* hint) const {
    if (shape_.size() != rank)
      fail(fmt::format("input shape {} is not supported ({})", shape_string(shape_), hint));
  }

  static int64_t with_activation(int64_t outputs, ActivationKind activation) {
    return activation == ActivationKind::kLinear ? outputs : saturating_mul(outputs, 2);
  }

  // Adds the layer to the running totals; refuses the model at the first layer that takes them
  // past the limit, before any later layer's size is even computed.
  void charge(const LayerPlan& layer) {
    plan_.parameters = saturating_add(plan_.parameters, layer.parameters);
    const int64_t parameter_bytes = saturating_mul(layer.parameters, 2 * kFloatBytes);
    const int64_t example_bytes =
        saturating_mul(saturating_add(layer.activations, layer.working), kFloatBytes);
    plan_.bytes = saturating_add(plan_.bytes, saturating_add(parameter_bytes, example_bytes));
    if (static_cast<uint64_t>(plan_.bytes) <= limit_.bytes) return;
    throw TooLargeError(message(fmt::format(
        "{} parameters and {} values per example bring the model to at least {} (parameters "
        "count twice, for their gradients), more than {}",
        count_text(layer.parameters), count_text(saturating_add(layer.activations, layer.working)),
        format_bytes(static_cast<uint64_t>(plan_.bytes)), limit_.text)));
  }

  LayerPlan plan_layer(const LayerSpec& layer) const {
    switch (layer.kind) {
      case LayerKind::kDense:
        return plan_dense(layer);
      case LayerKind::kConv2D:
        return plan_conv(layer);
      case LayerKind::kMaxPooling2D:
      case LayerKind::kAveragePooling2D:
        return plan_pool(layer);
      case LayerKind::kFlatten:
        return {.output_shape = {elements(shape_)}};
      case LayerKind::kReshape:
        return {.output_shape = resolved_target(layer.target_shape),
                .activations = elements(shape_)};
      case LayerKind::kDropout:  // its mask beside its output
        return {.output_shape = shape_, .activations = saturating_mul(elements(shape_), 2)};
      case LayerKind::kActivation:
        return {.output_shape = shape_, .activations = elements(shape_)};
      case LayerKind::kBatchNormalization:
        return plan_batch_norm(layer);
    }
    fail("unknown layer kind");
  }

  LayerPlan plan_batch_norm(const LayerSpec& layer) const {
    // Keras counts the batch as axis 0: the channels of a (h, w, c) input are axis 3 or -1.
    const int last = static_cast<int>(shape_.size());
    if (layer.axis != -1 && layer.axis != last) {
      fail(fmt::format(
          "axis {} is not supported for input shape {} (only the last axis, -1 or {}: the "
          "channels)",
          layer.axis, shape_string(shape_), last));
    }
    const int64_t vectors = 2 + (layer.center ? 1 : 0) + (layer.scale ? 1 : 0);
    return {.output_shape = shape_,
            .parameters = saturating_mul(shape_.back(), vectors),
            .activations = elements(shape_)};
  }

  LayerPlan plan_dense(const LayerSpec& layer) const {
    require_rank(1, "Dense takes a flat input; add a Flatten before it");
    if (layer.units <= 0) fail(fmt::format("units {} is not positive", layer.units));
    const int64_t weights = saturating_mul(shape_[0], layer.units);
    return {.output_shape = {layer.units},
            .parameters = saturating_add(weights, layer.use_bias ? layer.units : 0),
            .activations = with_activation(layer.units, layer.activation)};
  }

  // Output size of one axis of a window; refuses a window that does not fit.
  AxisGeometry axis(int64_t in, int window, int stride, Padding padding, const char* what) const {
    if (window <= 0 || stride <= 0) {
      fail(fmt::format("{} window {} and stride {} must be positive", what, window, stride));
    }
    const AxisGeometry geometry = axis_geometry(static_cast<int>(in), window, stride, padding);
    if (geometry.out <= 0) {
      fail(fmt::format("a {} window of {} does not fit the input's {} with VALID padding", what,
                       window, in));
    }
    return geometry;
  }

  LayerPlan plan_conv(const LayerSpec& layer) const {
    require_rank(3, "Conv2D takes (height, width, channels)");
    if (layer.filters <= 0) fail(fmt::format("filters {} is not positive", layer.filters));
    const int kh = layer.kernel_size[0], kw = layer.kernel_size[1];
    const AxisGeometry rows = axis(shape_[0], kh, layer.strides[0], layer.padding, "row");
    const AxisGeometry cols = axis(shape_[1], kw, layer.strides[1], layer.padding, "column");
    const int64_t patch = saturating_mul(saturating_mul(kh, kw), shape_[2]);
    const Shape out = {rows.out, cols.out, layer.filters};
    const int64_t weights = saturating_mul(patch, layer.filters);
    return {.output_shape = out,
            .parameters = saturating_add(weights, layer.use_bias ? layer.filters : 0),
            .activations = with_activation(elements(out), layer.activation),
            .working = saturating_mul(int64_t{rows.out} * cols.out, patch)};
  }

  // The counts the layers and their kernels hold in an int: an example's values, and the patch
  // (KH·KW·C_in) of a Conv2D.
  void check_indexed(const LayerSpec& spec, const LayerPlan& layer) const {
    if (!fits_index(layer.output_shape)) {
      fail(fmt::format("output shape {} holds {} values; the layers index at most {}",
                       shape_string(layer.output_shape), count_text(elements(layer.output_shape)),
                       kMaxIndexed));
    }
    if (spec.kind != LayerKind::kConv2D) return;
    const int64_t patch =
        saturating_mul(saturating_mul(spec.kernel_size[0], spec.kernel_size[1]), shape_[2]);
    if (patch > kMaxIndexed) {
      fail(fmt::format(
          "a {}x{} kernel over {} channels is a patch of {} values; the convolution "
          "kernels index at most {}",
          spec.kernel_size[0], spec.kernel_size[1], shape_[2], count_text(patch), kMaxIndexed));
    }
  }

  LayerPlan plan_pool(const LayerSpec& layer) const {
    require_rank(3, "pooling takes (height, width, channels)");
    const AxisGeometry rows =
        axis(shape_[0], layer.pool_size[0], layer.strides[0], layer.padding, "row");
    const AxisGeometry cols =
        axis(shape_[1], layer.pool_size[1], layer.strides[1], layer.padding, "column");
    const Shape out = {rows.out, cols.out, shape_[2]};
    // Max pooling keeps the index of each window's maximum beside its output.
    const int64_t copies = layer.kind == LayerKind::kMaxPooling2D ? 2 : 1;
    return {.output_shape = out, .activations = saturating_mul(elements(out), copies)};
  }

  // Keras lets one dimension of target_shape be -1: whatever the others leave.
  Shape resolved_target(const Shape& target) const {
    if (target.empty()) fail("target_shape [] is not a shape");
    Shape out = target;
    int64_t known = 1;
    int unknown = -1;
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i] == -1 && unknown < 0) {
        unknown = static_cast<int>(i);
      } else if (out[i] <= 0) {
        fail(fmt::format("target_shape {} is not a shape", shape_string(target)));
      } else {
        known = saturating_mul(known, out[i]);
      }
    }
    const int64_t have = elements(shape_);
    // known is at least 1, and a saturated known is more than any input holds: no division by
    // zero, and no quotient of a wrapped product.
    if (unknown >= 0) {
      if (known > have || have % known != 0)
        fail(fmt::format("target_shape {} does not divide input shape {}", shape_string(target),
                         shape_string(shape_)));
      out[static_cast<size_t>(unknown)] = have / known;
    }
    if (elements(out) != have)
      fail(fmt::format("target_shape {} does not hold the {} values of input shape {}",
                       shape_string(target), have, shape_string(shape_)));
    return out;
  }

  const ModelSpec& spec_;
  const AllocationLimit& limit_;
  const std::string& source_;
  Shape shape_;
  size_t index_ = 0;
  ModelPlan plan_;
};

}  // namespace

ModelPlan plan_model(const ModelSpec& spec, const AllocationLimit& limit,
                     const std::string& source) {
  return Planner(spec, limit, source).plan();
}

ModelPlan plan_model(const ModelSpec& spec, uint64_t memory_limit_bytes,
                     const std::string& source) {
  return plan_model(spec, machine_allocation_limit(memory_limit_bytes), source);
}

}  // namespace dtrain
