// --feature_scale: the factor that brings a user's numeric features (CSV columns, a TFRecord
// float_list) to the range the model is trained at, given as a fraction "A/B" or a number. uint8
// pixels (IDX, TFRecord bytes) are not numeric features: dtrain always divides them by 255.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace dtrain {

struct FeatureScale {
  // x × numerator / denominator, in float32 and in that order, so that "1/255" gives exactly the
  // x / 255 IDX pixels get, and an ONNX graph's Mul and Div (export/onnx_graph.h) the same bits.
  float numerator = 1;
  float denominator = 1;
  std::string text;  // as given: "1/255", "0.5"

  float apply(float x) const { return x * numerator / denominator; }
  double value() const { return static_cast<double>(numerator) / denominator; }
};

// "A/B" or "A", with A and B positive finite numbers; nullopt for anything else.
std::optional<FeatureScale> parse_feature_scale(std::string_view text);

}  // namespace dtrain
