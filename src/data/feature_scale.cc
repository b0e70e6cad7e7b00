// Parsing a feature scale with std::from_chars: no locale, so "0.5" means a half everywhere.
#include "data/feature_scale.h"

#include <charconv>
#include <cmath>

namespace dtrain {
namespace {

std::optional<float> positive_number(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  const float as_float = static_cast<float>(value);
  if (!std::isfinite(as_float) || !(as_float > 0)) return std::nullopt;
  return as_float;
}

}  // namespace

std::optional<FeatureScale> parse_feature_scale(std::string_view text) {
  const size_t slash = text.find('/');
  const std::optional<float> numerator = positive_number(text.substr(0, slash));
  const std::optional<float> denominator = slash == std::string_view::npos
                                               ? std::optional<float>(1.0f)
                                               : positive_number(text.substr(slash + 1));
  if (!numerator || !denominator) return std::nullopt;
  return FeatureScale{*numerator, *denominator, std::string(text)};
}

}  // namespace dtrain
