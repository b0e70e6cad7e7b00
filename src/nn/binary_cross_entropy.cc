// Binary cross-entropy on logits, one example at a time, in double.
#include "nn/binary_cross_entropy.h"

#include <cmath>

namespace dtrain {

float binary_cross_entropy(const float* logits, const int32_t* labels, int n, float* dlogits,
                           const float* weights) {
  double total = 0.0;
  const double inv_n = n > 0 ? 1.0 / n : 0.0;
  for (int r = 0; r < n; ++r) {
    const double x = logits[r];
    const double y = labels[r];
    const double weight = weights != nullptr ? weights[r] : 1.0;
    total += weight * (std::max(x, 0.0) - x * y + std::log1p(std::exp(-std::fabs(x))));
    if (dlogits != nullptr)
      dlogits[r] = static_cast<float>((sigmoid_probability(logits[r]) - y) * inv_n * weight);
  }
  return static_cast<float>(total * inv_n);
}

void threshold_logits(const float* logits, int n, int32_t* predictions) {
  for (int r = 0; r < n; ++r) predictions[r] = logits[r] >= 0.0f ? 1 : 0;
}

double sigmoid_probability(float logit) {
  // exp of a negative number only: no overflow for a logit of any size.
  const double x = logit;
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1.0 + e);
}

}  // namespace dtrain
